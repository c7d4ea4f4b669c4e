// Behaviours that OpenResty's own test files showed Gatehouse getting wrong in the wide run of
// 2026-12-02 (docs/lua.md, "OpenResty's own tests"): subrequests made after ngx.eof (t/092-eof.t),
// ngx.worker.pids (t/122-worker.t), LUA_PATH from the environment and the lua_code_cache alert
// (t/123-lua-path.t), no default Content-Type on a 304 (t/118-use-default-type.t), ngx.say's
// argument errors (t/032-iolist.t), a traceback's 22 levels (t/073-backtrace.t).
// Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same config.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { startPair } from '../kit/pair.ts';
import { LUA_MODULES, logged, same, sameLog } from './hooks-kit.ts';

// a chain of calls deeper than OpenResty's traceback shows (no tail calls, so LuaJIT keeps every frame)
const deep = ['local function func1() error("deep blah") end']
  .concat(Array.from({ length: 24 }, (_, i) => `local function func${i + 2}() local v = func${i + 1}() return v end`))
  .concat(['func25()']).join('\n');

const pair = await startPair({ after }, {
  env: { LUA_PATH: '/foo/bar/?.lua;;', LUA_CPATH: '/baz/?.so' },
  conf: `${LUA_MODULES}error_log logs/error.log info;
env LUA_PATH;
env LUA_CPATH;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location = /eof {
            content_by_lua_block {
                ngx.say("early")
                ngx.eof()
                local a, b = ngx.location.capture_multi{ { "/proxy/tom" }, { "/proxy/jim" } }
                ngx.log(ngx.WARN, "after eof: ", a.status, " ", a.body, ", ", b.status, " ", b.body)
            }
        }
        location ~ ^/proxy/(\\w+)$ {
            proxy_pass http://127.0.0.1:$server_port/slow?who=$1;
        }
        location = /slow {
            content_by_lua_block { ngx.sleep(0.3) ngx.print("hello ", ngx.var.arg_who) }
        }
        location = /pids {
            content_by_lua_block {
                local pids, pid = ngx.worker.pids(), ngx.worker.pid()
                local found = false
                for _, p in ipairs(pids) do if p == pid then found = true end end
                ngx.say(#pids == ngx.worker.count(), " ", found)
            }
        }
        location = /path { content_by_lua_block { ngx.say(package.path) ngx.say(package.cpath) } }
        location = /uncached {
            lua_code_cache off;
            content_by_lua_block { ngx.say("ok") }
        }
        location = /not-modified {
            default_type text/plain;
            content_by_lua_block { ngx.status = ngx.HTTP_NOT_MODIFIED }
        }
        location = /say-hash { content_by_lua_block { ngx.say({ foo = 3 }) } }
        location = /say-holes { content_by_lua_block { ngx.say({ "a", nil, { "b", false, 3 } }, ngx.null) } }
        location = /say-nested-bad { content_by_lua_block { ngx.print({ "a", { print } }) } }
        location = /say-bad { content_by_lua_block { ngx.say("x", print) } }
        location = /deep { content_by_lua_block {
${deep}
        } }
    }
}
`,
});

test('subrequests made after ngx.eof run to their end though the client has its response', async () => {
  assert.equal((await same(pair, '/eof')).body, 'early\n');
  assert.deepEqual(await sameLog(pair, /after eof/), [
    '[warn] [lua] content_by_lua(nginx.conf:12):5: after eof: 200 hello tom, 200 hello jim while sending to client, client: 127.0.0.1, server: , request: "GET /eof HTTP/1.1", host: "localhost"',
  ]);
});

test('ngx.worker.pids has a pid per worker, this one among them', async () => {
  assert.equal((await same(pair, '/pids')).body, 'true true\n');
});

test('LUA_PATH and LUA_CPATH from the environment make the default package paths; lua_code_cache off is an alert', async () => {
  const body = (await same(pair, '/path')).body;
  // Debian's head, a `;`, then LUA_PATH with `;;` standing for LuaJIT's own default
  assert.match(body, /^\/usr\/share\/lua\/5\.1\/\?\.lua;;\/foo\/bar\/\?\.lua;\.\/\?\.lua;.*init\.lua;\n\/baz\/\?\.so\n$/);
  assert.equal((await same(pair, '/uncached')).body, 'ok\n');
  const place = (lines: string[]) => lines.map((l) => l.replace(/ in \S+nginx\.conf:/, ' in nginx.conf:'));
  const gh = place(await logged(pair.gh, /lua_code_cache is off/));
  assert.deepEqual(gh, ['[alert] lua_code_cache is off; this will hurt performance in nginx.conf:35']);
  if (pair.ng) assert.deepEqual(gh, place(await logged(pair.ng, /lua_code_cache is off/)));
});

test('a 304 from Lua gets no Content-Type from default_type', async () => {
  const r = await same(pair, '/not-modified');
  assert.equal(r.status, 304);
  assert.equal(r.headers.find(([n]) => /content-type/i.test(n)), undefined);
});

test('ngx.say and ngx.print take arrays (holes print as nil) and refuse other tables and types as OpenResty does', async () => {
  assert.equal((await same(pair, '/say-holes')).body, 'anilbfalse3null\n');
  for (const path of ['/say-hash', '/say-nested-bad', '/say-bad']) assert.equal((await same(pair, path)).status, 500);
  const first = (lines: string[]) => lines.map((l) => l.split('\n')[0]);
  assert.deepEqual(first(await sameLog(pair, /non-array table found|bad data type|array table expected/)), [
    "[error] lua entry thread aborted: runtime error: content_by_lua(nginx.conf:42):1: bad argument #1 to 'say' (non-array table found)",
    "[error] lua entry thread aborted: runtime error: content_by_lua(nginx.conf:44):1: bad argument #1 to 'print' (bad data type function found)",
    "[error] lua entry thread aborted: runtime error: content_by_lua(nginx.conf:45):1: bad argument #2 to 'say' (string, number, boolean, nil, ngx.null, or array table expected, but got function)",
  ]);
});

test('a traceback shows the first 22 levels of a deeper stack, then "..."', async () => {
  assert.equal((await same(pair, '/deep')).status, 500);
  const frames = async (srv: typeof pair.gh) => {
    await logged(srv, /deep blah/);
    const log = srv.readFile('error.log');
    const trace = log.slice(log.indexOf('deep blah'));
    return { funcs: trace.match(/in function 'func\d+'/g), dots: /\n\t\.\.\.\n|\n\t\.\.\.,/.test(trace) };
  };
  const gh = await frames(pair.gh);
  assert.equal(gh.dots, true);
  assert.equal(gh.funcs?.at(-1), "in function 'func21'");
  if (pair.ng) assert.deepEqual(gh, await frames(pair.ng));
});

// the second batch: ngx.sleep, post args, exit_worker_by_lua, echo's variables, light threads'
// coroutine.status, base64 and shdict argument checks (t/077-sleep.t, t/031-post-args.t,
// t/089-phase.t, t/088-req-method.t, t/127-uthread-kill.t, t/013-base64.t, t/144-shdict-incr-init.t)
const more = await startPair({ after }, {
  conf: `${LUA_MODULES}load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;
error_log logs/error.log debug;
events {}
http {
    access_log off;
    lua_shared_dict dogs 1m;
    exit_worker_by_lua_block { ngx.log(ngx.ERR, "leaving in ", ngx.get_phase()) }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location = /sleep { content_by_lua_block { ngx.sleep(0.01) ngx.say("slept") } }
        location = /sleep-bad { content_by_lua_block { ngx.sleep("a") } }
        location = /sleep-two { content_by_lua_block { ngx.sleep(1, 2) } }
        location = /post {
            content_by_lua_block {
                ngx.req.read_body()
                local args, err = ngx.req.get_post_args(2)
                ngx.say(err, " ", args.foo, " ", args.bar, " ", args.baz)
            }
        }
        location = /post-unread { content_by_lua_block { ngx.req.get_post_args() } }
        location = /echo-vars { echo "$echo_request_method $echo_client_request_method $echo_request_uri [$echo_request_body]"; }
        location = /threads {
            content_by_lua_block {
                local t = ngx.thread.spawn(function() ngx.sleep(0.01) end)
                local q = ngx.thread.spawn(function() return 2 end)
                ngx.say(coroutine.status(t), " ", coroutine.status(q))
                ngx.thread.wait(t)
                ngx.say(coroutine.status(t), " ", coroutine.status(coroutine.create(function() end)))
            }
        }
        location = /base64 { content_by_lua_block { ngx.say(ngx.encode_base64(nil), "|", ngx.encode_base64(true), "|", ngx.encode_base64(12)) } }
        location = /base64-bad { content_by_lua_block { ngx.decode_base64(12) } }
        location = /http10 {
            content_by_lua_block {
                ngx.say("hello, world")
                local ok, err = ngx.flush(false)
                ngx.say(tostring(ok), " ", err)
            }
        }
        location = /http10-off {
            lua_http10_buffering off;
            content_by_lua_block { ngx.say("hello, world") ngx.flush(true) ngx.say("hiya") }
        }
        location = /ctx-jump { rewrite_by_lua_block { ngx.ctx.foo = 1 } echo_exec /echo-vars; }
        location = /escape-types {
            content_by_lua_block {
                local s = "https://www.google.com/?t=abc@ :#%&+;\\"'<>[]{}\\\\" .. string.char(127, 200)
                for i = 0, 6 do ngx.say(i, " ", ngx.escape_uri(s, i)) end
            }
        }
        location = /escape-range { content_by_lua_block { ngx.escape_uri("x", -1) } }
        location = /incr-bad { content_by_lua_block { ngx.say(pcall(ngx.shared.dogs.incr, ngx.shared.dogs, "k", 1, "bar")) } }
    }
}
`,
});

test('ngx.sleep: its argument errors and its debug lines', async () => {
  assert.equal((await same(more, '/sleep')).body, 'slept\n');
  for (const srv of [more.gh, more.ng]) {
    if (!srv) continue;
    assert.deepEqual(await logged(srv, /lua (ready to sleep|sleep timer expired)/),
      ['[debug] lua ready to sleep for 10 ms', '[debug] lua sleep timer expired: "/sleep?"']);
  }
  for (const path of ['/sleep-bad', '/sleep-two']) assert.equal((await same(more, path)).status, 500);
  const first = (lines: string[]) => lines.map((l) => l.split('\n')[0]);
  assert.deepEqual(first(await sameLog(more, /to 'sleep'|accepted 1/)), [
    "[error] lua entry thread aborted: runtime error: content_by_lua(nginx.conf:13):1: bad argument #1 to 'sleep' (number expected, got string)",
    '[error] lua entry thread aborted: runtime error: content_by_lua(nginx.conf:14):1: attempt to pass 2 arguments, but accepted 1',
  ]);
});

test('get_post_args: truncated past max, and an error when the body was not read', async () => {
  const form = 'POST /post HTTP/1.1';
  assert.equal((await same(more, form, 'Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 17\r\n', 'foo=3&bar=4&baz=2')).body, 'truncated 3 4 nil\n');
  assert.equal((await same(more, 'POST /post-unread HTTP/1.1', 'Content-Length: 3\r\n', 'a=1')).status, 500);
  await sameLog(more, /no request body found; maybe you should turn on lua_need_request_body\?/);
});

test("echo's request variables", async () => {
  assert.equal((await same(more, '/echo-vars?x=1')).body, 'GET GET /echo-vars []\n');
});

test('coroutine.status of a light thread: running, zombie, then dead once waited for', async () => {
  assert.equal((await same(more, '/threads')).body, 'running zombie\ndead suspended\n');
});

test('base64 and shared dict arguments checked as lua-resty-core checks them', async () => {
  assert.equal((await same(more, '/base64')).body, '|dHJ1ZQ==|MTI=\n');
  assert.equal((await same(more, '/base64-bad')).status, 500);
  await sameLog(more, /string argument only/);
  assert.equal((await same(more, '/incr-bad')).body, 'falsebad init arg: number expected, got string\n');
});

test('an HTTP/1.0 response from Lua is held whole and gets a Content-Length (lua_http10_buffering)', async () => {
  const held = await same(more, 'GET /http10 HTTP/1.0');
  assert.equal(held.body, 'hello, world\nnil buffering\n');
  assert.deepEqual(held.headers.find(([n]) => n === 'Content-Length'), ['Content-Length', '27']);
  const off = await same(more, 'GET /http10-off HTTP/1.0');
  assert.equal(off.headers.find(([n]) => n === 'Content-Length'), undefined);
  await sameLog(more, /lua http 1\.0 buffering makes ngx\.flush\(\) a no-op/);
});

test('a request\'s ngx.ctx is released with OpenResty\'s debug line', async () => {
  assert.equal((await same(more, '/ctx-jump')).body, 'GET GET /echo-vars []\n');
  for (const srv of [more.gh, more.ng]) if (srv) assert.match((await logged(srv, /lua release ngx\.ctx/))[0], /^\[debug\] lua release ngx\.ctx at ref \d+$/);
});

test('ngx.escape_uri with a type: nginx 1.22\'s escape sets; a type out of range is an error', async () => {
  const r = await same(more, '/escape-types');
  assert.match(r.body, /^0 https:\/\/www\.google\.com\/%3Ft=abc@%20:%23%25&\+;/);
  assert.equal((await same(more, '/escape-range')).status, 500);
  await sameLog(more, /"type" -1 out of range/);
});

test('exit_worker_by_lua runs as the server stops', async () => {
  for (const srv of [more.gh, more.ng]) {
    if (!srv) continue;
    srv.signal('QUIT');
    assert.match(await srv.waitForLog('error.log', /leaving in/, 10_000), /\[error\] .*\[lua\] exit_worker_by_lua\(nginx\.conf:9\):1: leaving in exit_worker/);
  }
});

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

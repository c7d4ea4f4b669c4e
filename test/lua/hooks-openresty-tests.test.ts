// Behaviours that OpenResty's own test files (lua-nginx-module t/001-set.t and others) check and
// that Gatehouse got wrong when they were first run against it: ngx.send_headers and
// ngx.headers_sent, the warning for a hook that writes a global, a *_by_lua_file path with
// variables, `$prefix` in lua_package_path, set_by_lua's refusals and its "unknown reason", and
// ngx.log's "file:line: func(): " prefix with the file's base name; from t/045-ngx-var.t and
// t/009-log.t: caseless variable names, nil, bad and unchangeable names in ngx.var; log argument
// errors, the STDERR level, a long message.
// Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same config.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { logged, luaPair, same, sameLog } from './hooks-kit.ts';

const pair = await luaPair({ after }, `
    lua_package_path "$prefix/lib/?.lua;;";
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /sent {
            content_by_lua_block {
                ngx.say(tostring(ngx.headers_sent))
                ngx.say(ngx.send_headers(), " ", tostring(ngx.headers_sent))
            }
        }
        location /send-first {
            content_by_lua_block {
                ngx.send_headers()
                ngx.status = 201
                ngx.header["X-Late"] = "1"
                ngx.say(ngx.status)
            }
        }
        location /global {
            content_by_lua_block {
                if not counter_global then counter_global = 1 else counter_global = counter_global + 1 end
                ngx.say(counter_global)
            }
        }
        location /file {
            set $script lib/answer.lua;
            content_by_lua_file $script;
        }
        location /missing {
            set $script lib/none.lua;
            content_by_lua_file $script;
        }
        location /module {
            content_by_lua_block { ngx.say(require("plus").add(2, 3)) }
        }
        location /set-exit {
            set_by_lua $v 'ngx.exit(0)';
            return 200 $v;
        }
        location /log-error {
            log_by_lua_block { error("log hook broke") }
            return 200 "fine\n";
        }
        location /log-nil {
            log_by_lua_block { error(nil) }
            return 200 "fine\n";
        }
        location /set-nil {
            set_by_lua $v 'error(nil)';
            return 200 $v;
        }
        location /var-case {
            set $Mixed 32;
            content_by_lua_block { ngx.say(ngx.var.MIXED, " ", ngx.var.mixed) }
        }
        location /var-nil {
            set $v 32;
            content_by_lua_block { ngx.say(ngx.var.v) ngx.var.v = nil ngx.say(ngx.var.v) }
        }
        location /var-bad { content_by_lua_block { ngx.say(ngx.var[true]) } }
        location /var-bad-set { content_by_lua_block { ngx.var[true] = 1 } }
        location /var-fixed { content_by_lua_block { ngx.var.query_string = 56 } }
        location /log-table { content_by_lua_block { ngx.log(ngx.ERR, {}) } }
        location /log-stderr { content_by_lua_block { ngx.log(ngx.STDERR, "to stderr level") ngx.say("ok") } }
        location /log-long { content_by_lua_block { ngx.log(ngx.ERR, "a" .. string.rep("h", 1970) .. "b") ngx.say("ok") } }
        location /ctx-other { content_by_lua_block { ngx.say("dog = ", ngx.ctx.dog) ngx.ctx.seen = true } }
        location /ctx-capture {
            content_by_lua_block {
                local given = { dog = "hello" }
                local a, b = ngx.location.capture_multi{ { "/ctx-other", { ctx = given } }, { "/ctx-other", { ctx = { dog = "hiya" } } } }
                ngx.print(a.body, b.body)
                ngx.say("parent: ", ngx.ctx.dog, " seen: ", tostring(given.seen))
            }
        }
        location /ctx-jump {
            rewrite_by_lua_block { ngx.ctx.foo = 32 ngx.req.set_uri("/ctx-after", true) }
        }
        location /ctx-after { content_by_lua_block { ngx.say(ngx.ctx.foo) } }
        location /exit-created-access { access_by_lua_block { ngx.exit(201) } }
        location /exit-created-content { content_by_lua_block { ngx.exit(201) } }
        location /exit-after-say { content_by_lua_block { ngx.say("x") ngx.exit(201) } }
        location /set-headers {
            set_by_lua $v 'ngx.send_headers()';
            return 200 $v;
        }
    }
`, {
  'lib/answer.lua': 'local function answer() ngx.log(ngx.ERR, "named caller") ngx.say("from the file") end\nanswer()\n',
  'lib/plus.lua': 'local M = {}\nfunction M.add(a, b) return a + b end\nreturn M\n',
}, 'error_log logs/error.log warn;\n');

test('ngx.send_headers and ngx.headers_sent; the head cannot change after send_headers', async () => {
  assert.equal((await same(pair, '/sent')).body, 'false\n1 true\n');
  const late = await same(pair, '/send-first');
  assert.equal(late.status, 200);
  assert.equal(late.body, '200\n');
  await sameLog(pair, /attempt to set (status|ngx\.header)/);
});

test('a hook that writes a global is warned once per new global; the value is shared', async () => {
  assert.equal((await same(pair, '/global')).body, '1\n');
  assert.equal((await same(pair, '/global')).body, '2\n');
  const lines = await sameLog(pair, /writing a global Lua variable/);
  assert.equal(lines.length, 1);
  assert.match(lines[0], /^\[warn\] \[lua\] _G write guard:\d+: __newindex\(\): writing a global Lua variable \('counter_global'\)/);
});

test('content_by_lua_file with variables in its path; $prefix in lua_package_path', async () => {
  assert.equal((await same(pair, '/file')).body, 'from the file\n');
  const named = await sameLog(pair, /named caller/);
  assert.match(named[0], /\[lua\] answer\.lua:1: answer\(\): named caller/);
  assert.equal((await same(pair, '/missing')).status, 404);
  // the same line but for the two servers' prefixes
  const missing = /failed to load external Lua file/;
  const withoutPrefix = (lines: string[]) => lines.map((l) => l.replace(/\/tmp\/gh-test-\w+\//g, 'PREFIX/'));
  const gh = withoutPrefix(await logged(pair.gh, missing));
  assert.deepEqual(gh, ['[error] failed to load external Lua file "PREFIX/lib/none.lua": cannot open PREFIX/lib/none.lua: No such file or directory, client: 127.0.0.1, server: , request: "GET /missing HTTP/1.1", host: "localhost"']);
  if (pair.ng) assert.deepEqual(gh, withoutPrefix(await logged(pair.ng, missing)));
  assert.equal((await same(pair, '/module')).body, '5\n');
});

test('set_by_lua refuses ngx.exit and ngx.send_headers; error(nil) is an unknown reason', async () => {
  for (const path of ['/set-exit', '/set-nil', '/set-headers']) assert.equal((await same(pair, path)).status, 500);
  const refused = await sameLog(pair, /API disabled in the context of set_by_lua\*/);
  assert.equal(refused.length, 2);
  assert.deepEqual(await sameLog(pair, /unknown reason/), ['[error] failed to run set_by_lua*: unknown reason, client: 127.0.0.1, server: , request: "GET /set-nil HTTP/1.1", host: "localhost"']);
});

test('an error in log_by_lua: "failed to run log_by_lua*:", the traceback without a coroutine line, none for error(nil)', async () => {
  assert.equal((await same(pair, '/log-error')).body, 'fine\n');
  assert.deepEqual(await sameLog(pair, /log hook broke/), ['[error] failed to run log_by_lua*: log_by_lua(nginx.conf:47):1: log hook broke']);
  // the traceback follows on its own lines, the request's context after its last one
  const tail = await sameLog(pair, /in main chunk while logging request.*GET \/log-error/);
  assert.equal(tail.length, 1);
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const text = srv.readFile('error.log');
    assert.match(text, /log hook broke\nstack traceback:\n\t\[C\]: in function 'error'\n\tlog_by_lua\(nginx\.conf:47\):1: in main chunk while logging request/);
  }
  assert.equal((await same(pair, '/log-nil')).body, 'fine\n');
  assert.deepEqual(await sameLog(pair, /failed to run log_by_lua\*: unknown/),
    ['[error] failed to run log_by_lua*: unknown reason while logging request, client: 127.0.0.1, server: , request: "GET /log-nil HTTP/1.1", host: "localhost"']);
});

test('ngx.var: caseless names, nil makes a variable not found, bad and unchangeable names', async () => {
  assert.equal((await same(pair, '/var-case')).body, '32 32\n');
  assert.equal((await same(pair, '/var-nil')).body, '32\nnil\n');
  for (const path of ['/var-bad', '/var-bad-set', '/var-fixed']) assert.equal((await same(pair, path)).status, 500);
  assert.equal((await sameLog(pair, /bad variable name/)).length, 2);
  await sameLog(pair, /variable "query_string" not changeable/);
});

test('ngx.log: a table without __tostring is argument #1, the STDERR level prints as [], a long line is cut as nginx cuts it', async () => {
  assert.equal((await same(pair, '/log-table')).status, 500);
  await sameLog(pair, /bad argument #1 to 'log'/);
  assert.equal((await same(pair, '/log-stderr')).body, 'ok\n');
  assert.match((await sameLog(pair, /to stderr level/))[0], /^\[\] \[lua\]/);
  assert.equal((await same(pair, '/log-long')).body, 'ok\n');
  // cut at nginx's 2048 bytes a line, newline included (where the cut falls differs by the
  // length of "pid#tid", so only Gatehouse's own line is checked)
  await logged(pair.gh, /ahhhh/);
  const raw = pair.gh.readFile('error.log').split('\n').find((l) => l.includes('ahhhh'))!;
  assert.equal(Buffer.byteLength(raw) + 1, 2048);
  assert.match(raw, /\[lua\] content_by_lua\(nginx\.conf:\d+\):1: ah+$/);
});

test('the ctx option of a capture is the subrequest\'s ngx.ctx; a set_uri jump starts a new ngx.ctx (t/033-ctx.t)', async () => {
  assert.equal((await same(pair, '/ctx-capture')).body, 'dog = hello\ndog = hiya\nparent: nil seen: true\n');
  assert.equal((await same(pair, '/ctx-jump')).body, 'nil\n');
});

test('ngx.exit(2xx) before any output answers with that status; after output the status stays', async () => {
  assert.equal((await same(pair, '/exit-created-access')).status, 201);
  assert.equal((await same(pair, '/exit-created-content')).status, 201);
  const said = await same(pair, '/exit-after-say');
  assert.equal(said.status, 200);
  assert.equal(said.body, 'x\n');
});

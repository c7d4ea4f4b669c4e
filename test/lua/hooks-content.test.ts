// content_by_lua*: output, ngx.exit/redirect/status/header, errors and ngx.log lines as OpenResty
// writes them. Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same config.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { ask, logged, luaPair, same, sameLog } from './hooks-kit.ts';
import { rawRequest } from '../kit/client.ts';

const pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /say {
            content_by_lua_block {
                ngx.say("a", 1, " ", 1.5, " ", 10/2, " ", nil, true, {"x", {"y", 2}})
                ngx.print("no newline")
                ngx.print({})
            }
        }
        location /inline { content_by_lua 'ngx.say("inline: ", ngx.var.arg_v)'; }
        location /file { content_by_lua_file html/hello.lua; }
        location /exit403 { content_by_lua_block { ngx.exit(403) } }
        location /exit204 { content_by_lua_block { ngx.exit(ngx.HTTP_NO_CONTENT) } }
        location /exit200 { content_by_lua_block { ngx.exit(ngx.HTTP_OK) } }
        location /exit-after { content_by_lua_block { ngx.say("partial") ngx.exit(404) ngx.say("never") } }
        location /exit-pcall {
            content_by_lua_block {
                local ok, err = pcall(ngx.exit, 410)
                ngx.say("pcall returned ", tostring(ok))
            }
        }
        location /redirect { content_by_lua_block { ngx.redirect("/elsewhere?a=1") } }
        location /redirect301 { content_by_lua_block { ngx.redirect("http://example.com/x", 301) } }
        location /headers {
            content_by_lua_block {
                ngx.status = 201
                ngx.header["X-One"] = "1"
                ngx.header.x_two = {"a", "b"}
                ngx.header.content_type = "application/json"
                ngx.header["X-Gone"] = "soon"
                ngx.header["X-Gone"] = nil
                ngx.say(ngx.header.x_one, " ", ngx.header["X-Two"][2], " ", tostring(ngx.header.x_gone), " ", ngx.status)
            }
        }
        location /error {
            content_by_lua_block {
                local t = nil
                local x = t.field
            }
        }
        location /error-call {
            content_by_lua_block {
                error("boom")
            }
        }
        location /log {
            content_by_lua_block {
                ngx.log(ngx.ERR, "an error ", 42, " ", nil, " ", true)
                ngx.log(ngx.WARN, "a warning")
                print("printed ", 1.0)
                ngx.say("logged")
            }
        }
        location /sleep {
            content_by_lua_block {
                ngx.sleep(0.05)
                ngx.say("woke ", ngx.var.arg_n)
            }
        }
        location /eof { content_by_lua_block { ngx.say("done") ngx.eof() ngx.say("after") } }
        location /error-after-say { content_by_lua_block { ngx.say("held") error("late") } }
        location /error-after-flush { content_by_lua_block { ngx.say("flushed") ngx.flush(true) error("late") } }
        location /big { content_by_lua_block { for i = 1, 100 do ngx.say(string.rep("x", 99)) end } }
        location /syntax { content_by_lua_block { ngx.say( } }
        location /hf-error {
            header_filter_by_lua_block { error("in header filter") }
            content_by_lua_block { ngx.say("body") }
        }
        location /bf-error {
            body_filter_by_lua_block { error("in body filter") }
            content_by_lua_block { ngx.say("body") }
        }
    }
`, { 'html/hello.lua': 'ngx.say("from a file")\n' });

test('ngx.say and ngx.print: values joined as OpenResty writes them, chunked, default_type', async () => {
  const r = await same(pair, '/say');
  assert.equal(r.status, 200);
  assert.equal(r.body, 'a1 1.5 5 niltruexy2\nno newline');
  assert.deepEqual(r.headers.find(([n]) => n === 'Content-Type'), ['Content-Type', 'text/plain']);
});

test('content_by_lua with a string, content_by_lua_file', async () => {
  assert.equal((await same(pair, '/inline?v=7')).body, 'inline: 7\n');
  assert.equal((await same(pair, '/file')).body, 'from a file\n');
});

test('ngx.exit: an error status is nginx\'s page; 200 ends an empty response; after output the body just ends', async () => {
  assert.equal((await same(pair, '/exit403')).status, 403);
  assert.equal((await same(pair, '/exit204')).status, 204);
  const ok = await same(pair, '/exit200');
  assert.equal(ok.status, 200);
  assert.equal(ok.body, '');
  const after = await same(pair, '/exit-after');
  assert.equal(after.status, 200);
  assert.equal(after.body, 'partial\n');
  assert.equal((await same(pair, '/exit-pcall')).status, 410, 'pcall does not stop ngx.exit');
});

test('ngx.redirect: 302 with the Location as given, 301 when asked', async () => {
  const r = await same(pair, '/redirect');
  assert.equal(r.status, 302);
  assert.deepEqual(r.headers.filter(([n]) => n === 'Location'), [['Location', '/elsewhere?a=1']]);
  assert.equal((await same(pair, '/redirect301')).status, 301);
});

test('ngx.status and ngx.header: set, several values, cleared, read back', async () => {
  const r = await same(pair, '/headers');
  assert.equal(r.status, 201);
  assert.equal(r.body, '1 b nil 201\n');
});

test('a runtime error: 500 and "lua entry thread aborted" with the chunk\'s name and line', async () => {
  assert.equal((await same(pair, '/error')).status, 500);
  assert.equal((await same(pair, '/error-call')).status, 500);
  const lines = await sameLog(pair, /lua entry thread aborted/);
  assert.deepEqual(lines, [
    "[error] lua entry thread aborted: runtime error: content_by_lua(nginx.conf:42):3: attempt to index local 't' (a nil value)",
    '[error] lua entry thread aborted: runtime error: content_by_lua(nginx.conf:48):2: boom',
  ]);
});

test('ngx.log and print: "[lua] chunk:line: message" at their levels, with the request', async () => {
  assert.equal((await same(pair, '/log')).body, 'logged\n');
  const lines = await sameLog(pair, /\[lua\] content_by_lua/);
  assert.deepEqual(lines, [
    '[error] [lua] content_by_lua(nginx.conf:53):2: an error 42 nil true, client: 127.0.0.1, server: , request: "GET /log HTTP/1.1", host: "localhost"',
    '[warn] [lua] content_by_lua(nginx.conf:53):3: a warning, client: 127.0.0.1, server: , request: "GET /log HTTP/1.1", host: "localhost"',
    '[notice] [lua] content_by_lua(nginx.conf:53):4: printed 1, client: 127.0.0.1, server: , request: "GET /log HTTP/1.1", host: "localhost"',
  ]);
});

test('ngx.sleep yields: requests sleeping together each get their own answer', async () => {
  const answers = await Promise.all([1, 2, 3].map((n) => ask(pair.gh, `/sleep?n=${n}`)));
  assert.deepEqual(answers.map((a) => a.body), ['woke 1\n', 'woke 2\n', 'woke 3\n']);
  await same(pair, '/sleep?n=4');
});

test('ngx.eof ends the body; later output is dropped', async () => {
  assert.equal((await same(pair, '/eof')).body, 'done\n');
});

test('a chunk that does not compile: 500, and Lua\'s message in error.log when it is first run', async () => {
  assert.equal((await same(pair, '/syntax')).status, 500);
  const lines = await sameLog(pair, /failed to load inlined Lua code/);
  assert.equal(lines.length, 1);
});

test('output is held as nginx holds it: an error after a small ngx.say sends nothing; after ngx.flush the body is cut short', async () => {
  const held = await same(pair, '/error-after-say');
  assert.equal(held.status, 0, 'the connection closes with nothing sent');
  const flushed = await same(pair, '/error-after-flush');
  assert.equal(flushed.status, 200);
  assert.equal(flushed.body, 'flushed\n');
  assert.equal(flushed.complete, false);
  const big = await same(pair, '/big');
  assert.equal(big.body.length, 10000);
});

test('HEAD gets the head only; two requests on one kept-alive connection', async () => {
  const head = await same(pair, 'HEAD /say HTTP/1.1');
  assert.equal(head.status, 200);
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const raw = await rawRequest(srv.port(8080), 'GET /inline?v=1 HTTP/1.1\r\nHost: localhost\r\n\r\nGET /inline?v=2 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    const text = raw.toString('latin1');
    assert.match(text, /inline: 1\n\r\n0\r\n\r\nHTTP\/1\.1 200 OK/);
    assert.match(text, /inline: 2\n/);
  }
});

test('an error in header_filter_by_lua or body_filter_by_lua: "failed to run …" and the connection closed', async () => {
  assert.equal((await same(pair, '/hf-error')).status, 0);
  assert.equal((await same(pair, '/bf-error')).status, 0);
  assert.equal((await sameLog(pair, /failed to run header_filter_by_lua/)).length, 1);
  // the failed filter runs again for the end of the body, a call of its own (a second line):
  // wait for both lines on both servers before reading, the second may still be on its way
  const twice = /failed to run body_filter_by_lua[\s\S]*failed to run body_filter_by_lua/;
  await Promise.all([pair.gh, pair.ng].map((srv) => srv?.waitForLog('error.log', twice, 10_000)));
  const bf = await sameLog(pair, /failed to run body_filter_by_lua/);
  assert.deepEqual(bf, Array(2).fill('[error] failed to run body_filter_by_lua*: body_filter_by_lua(nginx.conf:76):1: in body filter'));
});

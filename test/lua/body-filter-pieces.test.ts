// What body_filter_by_lua is called with: one call per piece a handler sends (each ngx.say or
// ngx.print, each echo), then a last call of its own with "" and eof, as nginx's handlers send
// their chain links; and ngx.flush()'s "nothing to flush". Reference: Debian's nginx 1.22 +
// libnginx-mod-http-lua 0.10.23 (+ echo) on the same configuration and the same requests.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { same, luaPair } from './hooks-kit.ts';
import type { Pair } from '../kit/pair.ts';

// each call of the filter shows as [its chunk], with |eof on the one that has it
const MARK = `body_filter_by_lua_block {
            ngx.arg[1] = "[" .. ngx.arg[1] .. (ngx.arg[2] and "|eof" or "") .. "]"
        }`;

const pair: Pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /echo {
            echo -n hello world;
            echo -n hiya globe;
            ${MARK}
        }
        location /say {
            content_by_lua_block {
                ngx.say("one")
                ngx.print("two", "2")
                ngx.say("three")
            }
            ${MARK}
        }
        location /say-flush {
            content_by_lua_block {
                ngx.say("before")
                ngx.flush(true)
                ngx.say("after")
            }
            ${MARK}
        }
        location /cut {
            echo hello world;
            echo hiya globe;
            body_filter_by_lua_block {
                if string.match(ngx.arg[1], "hello") then
                    ngx.arg[1] = string.upper(ngx.arg[1])
                    ngx.arg[2] = true
                    return
                end
                ngx.arg[1] = nil
            }
        }
        location /length-dropped {
            content_by_lua_block {
                ngx.header.content_length = 12
                ngx.say("Hello World")
            }
            header_filter_by_lua_block { ngx.header.content_length = nil }
            body_filter_by_lua_block { ngx.arg[1] = ngx.arg[1] .. "+" }
        }
        location /two-subrequests {
            echo_location /first-piece;
            echo_location /first-piece;
        }
        location /first-piece {
            echo -n hello world;
            echo -n hiya globe;
            body_filter_by_lua_block { ngx.arg[2] = 1 }
        }
        location /end-removed {
            return 200 "hello world";
            body_filter_by_lua_block { if ngx.arg[2] then ngx.arg[2] = false end }
        }
        location /capture-end-removed {
            content_by_lua_block {
                local res = ngx.location.capture("/end-removed")
                ngx.say("truncated: ", res.truncated, ", body: ", res.body)
            }
        }
        location /nested-table {
            echo -n hello;
            body_filter_by_lua_block {
                if ngx.arg[1] ~= "" then ngx.arg[1] = {{ngx.arg[1]}, "!", 1, "\\n"} end
            }
        }
        location /flush-first {
            content_by_lua_block {
                local ok, err = ngx.flush()
                ngx.status = 404
                ngx.say("flush: ", ok, " ", err)
            }
        }
        location /flush-head-only {
            content_by_lua_block {
                ngx.send_headers()
                local ok, err = ngx.flush()
                ngx.say("flush: ", ok, " ", err)
                ngx.say("again: ", ngx.flush())
            }
        }
    }
`, undefined, 'load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;\n');

test('echo: one filter call per echo, then the end alone', async () => {
  const r = await same(pair, '/echo');
  assert.equal(r.status, 200);
  assert.equal(r.body, '[hello world][hiya globe][|eof]');
});

test('content_by_lua: one filter call per ngx.say or ngx.print, then the end alone', async () => {
  assert.equal((await same(pair, '/say')).body, '[one\n][two2][three\n][|eof]');
});

test('ngx.flush between outputs: the filters see its flush buffer as an empty piece', async () => {
  assert.equal((await same(pair, '/say-flush')).body, '[before\n][][after\n][|eof]');
});

test('a filter that sets eof on a piece: the pieces after it are dropped', async () => {
  const r = await same(pair, '/cut');
  assert.equal(r.body, 'HELLO WORLD\n');
});

test('body filters run in subrequests: eof set on the first piece of each drops the rest', async () => {
  assert.equal((await same(pair, '/two-subrequests')).body, 'hello worldhello world');
});

test('a filter that takes the end away from a subrequest: the capture is truncated', async () => {
  assert.equal((await same(pair, '/capture-end-removed')).body, 'truncated: true, body: hello world\n');
});

test('ngx.arg[1] set to nested arrays of strings and numbers: joined', async () => {
  const r = await same(pair, '/nested-table');
  assert.equal(r.status, 200);
  assert.equal(r.body, 'hello!1\n');
});

test('the end reaches the filter as a call of its own (its append shows twice)', async () => {
  const r = await same(pair, '/length-dropped');
  assert.equal(r.body, 'Hello World\n++');
  assert.ok(!r.headers.some(([n]) => n.toLowerCase() === 'content-length'));
});

test('ngx.flush() before any output: nil, "nothing to flush", and the status can still change', async () => {
  const r = await same(pair, '/flush-first');
  assert.equal(r.status, 404);
  assert.equal(r.body, 'flush: nil nothing to flush\n');
});

test('ngx.flush() after ngx.send_headers with no body yet: "nothing to flush"; after output: 1', async () => {
  const r = await same(pair, '/flush-head-only');
  assert.equal(r.body, 'flush: nil nothing to flush\nagain: 1\n');
});

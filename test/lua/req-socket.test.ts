// ngx.req.socket(): the request body as a read-only cosocket, and ngx.req.socket(true): the
// client connection itself (raw), which a handler then answers byte by byte. Reference: Debian's
// nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same configuration and the same requests.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { same, luaPair, seen } from './hooks-kit.ts';
import { rawRequest } from '../kit/client.ts';
import type { Pair } from '../kit/pair.ts';

const pair: Pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /pieces {
            content_by_lua_block {
                local sock, err = ngx.req.socket()
                if not sock then ngx.say("socket: ", err) return end
                ngx.say("5: ", sock:receive(5))
                ngx.say("line: ", sock:receive())
                local data, err, partial = sock:receive(100)
                ngx.say("rest: ", data, " ", err, " [", partial, "]")
                ngx.say("again: ", sock:receive(1))
            }
        }
        location /until {
            content_by_lua_block {
                local sock = assert(ngx.req.socket())
                local part = sock:receiveuntil("--b")
                for i = 1, 4 do
                    local data, err, partial = part()
                    ngx.say(i, ": ", data, " ", err, " [", partial, "]")
                end
            }
        }
        location /any {
            content_by_lua_block {
                local sock = assert(ngx.req.socket())
                ngx.say(sock:receiveany(4))
                ngx.say(sock:receive("*a"))
            }
        }
        location /twice {
            content_by_lua_block {
                assert(ngx.req.socket())
                ngx.say("second: ", ngx.req.socket())
            }
        }
        location /after-read-body {
            content_by_lua_block {
                ngx.req.read_body()
                ngx.say("socket: ", ngx.req.socket())
            }
        }
        location /raw {
            content_by_lua_block {
                local sock, err = ngx.req.socket(true)
                if not sock then ngx.say("raw: ", err) return end
                local body = sock:receive(tonumber(ngx.var.http_content_length))
                local ok, err = sock:send("HTTP/1.1 200 OK\\r\\nContent-Length: " .. #body + 7
                    .. "\\r\\nConnection: close\\r\\n\\r\\nraw: [" .. body .. "]")
                ngx.log(ngx.ERR, "say after raw: ", ngx.say("after"))
            }
        }
        location /raw-after-output {
            content_by_lua_block {
                ngx.send_headers()
                ngx.say("socket: ", ngx.req.socket(true))
            }
        }
    }
`);

const post = (path: string, body: string, extra = '') => same(pair, `POST ${path} HTTP/1.1`, `Content-Length: ${body.length}\r\n${extra}`, body);

test('the body as a socket: sizes, lines, the end of the body as "closed"', async () => {
  const r = await post('/pieces', 'hello line one\nthe rest');
  assert.equal(r.body, '5: hello\nline:  line one\nrest: nil closed [the rest]\nagain: nilclosed\n');
});

test('receiveuntil over the body, and receiveany', async () => {
  const r = await post('/until', 'first--bsecond--bthird');
  assert.equal(r.body, '1: first nil [nil]\n2: second nil [nil]\n3: nil closed [third]\n4: nil closed [nil]\n');
  assert.equal((await post('/any', 'abcdefgh')).body, 'abcd\nefgh\n');
});

test('a request without a body, a second socket, a body already read', async () => {
  assert.equal((await same(pair, '/pieces')).body, 'socket: no body\n');
  assert.equal((await post('/twice', 'x')).body, 'second: nilrequest body already exists\n');
  assert.equal((await post('/after-read-body', 'x')).body, 'socket: nilrequest body already exists\n');
});

test('a chunked body is refused', async () => {
  const r = await same(pair, 'POST /pieces HTTP/1.1', 'Transfer-Encoding: chunked\r\n', '3\r\nabc\r\n0\r\n\r\n');
  assert.match(r.body, /^socket: /);
});

test('the raw socket answers the client itself; ngx.say after it returns an error', async () => {
  const body = 'ping';
  const req = `POST /raw HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  const gh = seen(await rawRequest(pair.gh.port(8080), req));
  assert.equal(gh.status, 200);
  assert.equal(gh.body, 'raw: [ping]');
  if (pair.ng) assert.deepEqual(gh, seen(await rawRequest(pair.ng.port(8080), req)));
  for (const srv of pair.ng ? [pair.gh, pair.ng] : [pair.gh]) {
    await srv.waitForLog('error.log', /say after raw: /, 10_000);
    assert.match(srv.readFile('error.log'), /say after raw: nilraw request socket acquired/);
  }
  // a head held back (not on the wire yet) does not stop it: it is dropped, and the client gets nothing
  const dropped = await same(pair, '/raw-after-output');
  assert.equal(dropped.status, 0);
  assert.equal(dropped.body, '');
});

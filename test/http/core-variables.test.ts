/**
 * ngx_http_core_module's variables as nginx computes them: request line
 * parts, arguments, cookies, headers, hosts and ports, byte counts, and the
 * $sent_http_* family. Reference test against Debian's nginx; values that
 * differ by run (times, ports, pids) are checked on Gatehouse alone.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { exchange, same, sharedPair } from './core-kit.ts';
import { GATEHOUSE_VER } from '../kit/server-name.ts';

const vars = ['request', 'request_method', 'request_uri', 'uri', 'document_uri', 'args', 'query_string', 'is_args',
  'arg_a', 'arg_B', 'arg_', 'cookie_foo', 'cookie_bar', 'http_user_agent', 'http_x_under', 'http_cookie', 'host',
  'server_protocol', 'server_name', 'scheme', 'https', 'content_length', 'content_type', 'remote_addr', 'server_addr',
  'request_length'];
const body = vars.map((v) => `${v}=[$${v}]`).join('\\n');

const pair = sharedPair({
  conf: `
events {}
http {
    log_format core '$request_length $bytes_sent $body_bytes_sent $status [$sent_http_content_type] '
                    '[$sent_http_connection] [$sent_http_keep_alive] [$sent_http_transfer_encoding] '
                    '[$sent_http_x_one] [$request_completion] $pipe';
    access_log %%PREFIX%%/access.log core;
    keepalive_timeout 30s 20;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / { return 200 "${body}\\n"; }
        location /sent {
            add_header X-One a;
            return 200 "x";
        }
        location /multi {
            add_header X-Multi a;
            add_header X-Multi b;
            add_header X-Sent "[$sent_http_x_multi]";
            return 204;
        }
        location /rate {
            set $limit_rate $arg_l;
            return 200 "[$limit_rate]";
        }
        location /status { return 200 "[$status]"; }
    }
}
`,
});

const requests = [
  'GET /a%20b/./c?a=1&b=2&aa=3 HTTP/1.0\r\nHost: Example.COM:8080\r\nCookie: foo=1, qux=0; bar=2\r\nCookie: baz=3\r\nUser-Agent: test/1\r\n\r\n',
  'GET /x?B=upper&a HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX_Under: ignored\r\n\r\n',
  'GET /x? HTTP/1.0\r\n\r\n',
  'GET http://abs.example:9/p?q=1 HTTP/1.0\r\nHost: other\r\n\r\n',
  'POST /body HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Type: text/x\r\nConnection: close\r\n\r\nhello',
  'get /bad HTTP/1.0\r\n\r\n',
];

for (const request of requests) {
  test(`variables for ${JSON.stringify(request.split('\r\n')[0])}`, async () => {
    await same(pair(), request);
  });
}

test('byte counts, $sent_http_* and $request_completion in the access log', async () => {
  const p = pair();
  const request = 'GET /sent HTTP/1.1\r\nHost: localhost\r\n\r\nGET /sent HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n';
  await same(p, request);
  const read = async (srv: typeof p.gh) => {
    await srv.waitForLog('access.log', / p$/m);
    return srv.readFile('access.log').toString().split('\n').filter((l) => l.includes('[a]'));
  };
  // $bytes_sent counts the Server header: `nginx/1.22.1` in nginx's, `gatehouse/VERSION` in ours
  const logged = (sign: string) => [`39 ${170 + sign.length} 1 200 [text/plain] [close] [-] [-] [a] [OK] .`, `58 ${141 + sign.length} 1 200 [text/plain] [close] [-] [-] [a] [OK] p`];
  // nginx 1.22 logs "close" even after a keep-alive response: r->keepalive is cleared before the log
  assert.deepEqual(await read(p.gh), logged(GATEHOUSE_VER));
  if (p.ng) assert.deepEqual(await read(p.ng), logged('nginx/1.22.1'));
});

test('several response headers of one name join in $sent_http_* (nginx 1.23 and later)', async () => {
  const r = await exchange(pair().gh, 'GET /multi HTTP/1.0\r\n\r\n');
  assert.match(r.text, /X-Sent: \[a, b\]/);
});

test('$limit_rate takes a size; $status', async () => {
  const p = pair();
  const rate = await same(p, 'GET /rate?l=40k HTTP/1.0\r\n\r\n');
  assert.match(rate.text, /\[40960\]$/);
  assert.match((await same(p, 'GET /rate HTTP/1.0\r\n\r\n')).text, /\[0\]$/);
  assert.match((await same(p, 'GET /status HTTP/1.0\r\n\r\n')).text, /\[200\]$/);
});

test('$request_length counts the head as received', async () => {
  const p = pair();
  const r = await exchange(p.gh, 'GET / HTTP/1.0\r\n\r\n');
  assert.match(r.text, /request_length=\[18\]/);
});

/**
 * Reading request heads: the request line, Host, header lines, framing
 * headers and methods, as nginx 1.22 answers them. Reference test: each
 * request goes to Gatehouse and to Debian's nginx on the same configuration
 * and the bytes that come back must be the same; the expected status is also
 * asserted on Gatehouse alone.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair, statusOf } from './core-kit.ts';

const pair = sharedPair({
  conf: `
events {}
http {
    access_log %%PREFIX%%/access.log;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / {
            return 200 "uri=$uri args=$args is_args=$is_args host=$host request_uri=$request_uri protocol=$server_protocol method=$request_method\\n";
        }
        location /h {
            add_header X-Foo "[$http_x_foo]";
            add_header X-Under "[$http_x_under]";
            add_header X-Ctl "[$http_x_ctl]";
            add_header X-Cookie "[$http_cookie]";
            return 204;
        }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        server_name localhost;
        ignore_invalid_headers off;
        location / {
            add_header X-Under "[$http_x_under]";
            add_header X-Dot "[$http_x_dot]";
            return 204;
        }
    }
}
`,
});

/** [what, request, status Gatehouse must answer (0: HTTP/0.9 without a head)]. */
const cases: Array<[string, string, number]> = [
  ['plain', 'GET /a?b=c HTTP/1.0\r\nHost: Foo.Example:80\r\n\r\n', 200],
  ['bare LF line ends', 'GET /a HTTP/1.0\nHost: example\n\n', 200],
  ['empty lines before the request', '\r\n\r\nGET / HTTP/1.0\r\n\r\n', 200],
  ['spaces between parts', 'GET   /a   HTTP/1.0  \r\n\r\n', 200],
  ['HTTP/0.9 GET', 'GET /nine?x=1\r\n', 0],
  ['HTTP/0.9 POST', 'POST /\r\n', 0],
  ['HTTP/1.1 without Host', 'GET / HTTP/1.1\r\n\r\n', 400],
  ['HTTP/1.2 is 1.1', 'GET / HTTP/1.2\r\nHost: a\r\n\r\n', 200],
  ['HTTP/2.0', 'GET / HTTP/2.0\r\n\r\n', 505],
  ['lowercase method', 'get / HTTP/1.0\r\n\r\n', 400],
  ['unknown method', 'FOO / HTTP/1.0\r\n\r\n', 200],
  ['TRACE', 'TRACE / HTTP/1.1\r\nHost: a\r\n\r\n', 405],
  ['CONNECT authority', 'CONNECT localhost:80 HTTP/1.1\r\nHost: a\r\n\r\n', 400],
  ['CONNECT path', 'CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n', 405],
  ['asterisk', 'OPTIONS * HTTP/1.0\r\n\r\n', 400],
  ['space in URI', 'GET /a b HTTP/1.0\r\n\r\n', 400],
  ['control byte in URI', 'GET /a\x02 HTTP/1.0\r\n\r\n', 400],
  ['UTF-8 in URI', 'GET /caf\xc3\xa9?q=\xc3\xa9 HTTP/1.0\r\n\r\n', 200],
  ['dot segments and escapes', 'GET /a/./b/../c%2Fd//e?x HTTP/1.0\r\n\r\n', 200],
  ['above the root', 'GET /a/../.. HTTP/1.0\r\n\r\n', 400],
  ['bad escape', 'GET /a%zz HTTP/1.0\r\n\r\n', 400],
  ['escaped NUL', 'GET /a%00 HTTP/1.0\r\n\r\n', 400],
  ['fragment', 'GET /a/b/..#frag HTTP/1.0\r\n\r\n', 200],
  ['empty args', 'GET /a? HTTP/1.0\r\n\r\n', 200],
  ['absolute URI', 'GET http://Abc.Example:81/p?q HTTP/1.0\r\nHost: other\r\n\r\n', 200],
  ['absolute URI without path', 'GET http://abc.example HTTP/1.0\r\n\r\n', 200],
  ['absolute URI with args only', 'GET http://abc.example?x=1 HTTP/1.0\r\n\r\n', 200],
  ['absolute URI in HTTP/1.1 without Host', 'GET http://other.test/abs HTTP/1.1\r\n\r\n', 400],
  ['absolute URI in HTTP/1.1 with Host', 'GET http://other.test/abs HTTP/1.1\r\nHost: x\r\n\r\n', 200],
  ['absolute URI with userinfo', 'GET http://u@abc.example/ HTTP/1.0\r\n\r\n', 400],
  ['absolute URI bad port', 'GET http://abc.example:1:2/ HTTP/1.0\r\n\r\n', 400],
  ['Host with trailing dot and port', 'GET / HTTP/1.0\r\nHost: WWW.Example.COM.:8080\r\n\r\n', 200],
  ['IPv6 Host', 'GET / HTTP/1.0\r\nHost: [::1]:8080\r\n\r\n', 200],
  ['empty Host', 'GET / HTTP/1.0\r\nHost: \r\n\r\n', 400],
  ['Host with slash', 'GET / HTTP/1.0\r\nHost: a/b\r\n\r\n', 400],
  ['Host with double dot', 'GET / HTTP/1.0\r\nHost: a..b\r\n\r\n', 400],
  ['Host with control byte', 'GET / HTTP/1.0\r\nHost: a\x02\r\n\r\n', 400],
  ['duplicate Host', 'GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n', 400],
  ['duplicate Content-Length', 'POST / HTTP/1.0\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx', 400],
  ['bad Content-Length', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\nx', 400],
  ['Content-Length and chunked', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400],
  ['unknown Transfer-Encoding', 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n', 501],
  ['chunked in HTTP/1.0', 'POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400],
  ['duplicate Authorization', 'GET / HTTP/1.0\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n', 400],
  ['folded header line', 'GET / HTTP/1.0\r\nX-Foo: a\r\n b\r\n\r\n', 400],
  ['colon first', 'GET / HTTP/1.0\r\n:foo: a\r\n\r\n', 400],
  ['control byte in a name', 'GET / HTTP/1.0\r\nX\x02: a\r\n\r\n', 400],
  ['NUL in a value', 'GET / HTTP/1.0\r\nX-Foo: a\x00b\r\n\r\n', 400],
  ['bare CR in a value', 'GET / HTTP/1.0\r\nX-Foo: a\rb\r\n\r\n', 400],
  ['control byte in a value', 'GET /h HTTP/1.0\r\nX-Ctl: a\x01b\r\n\r\n', 204],
  ['underscores are ignored', 'GET /h HTTP/1.0\r\nX_Under: 1\r\nX-Foo: 2\r\n\r\n', 204],
  ['invalid names are ignored', 'GET /h HTTP/1.0\r\nX.Foo: 1\r\n</kie>: 2\r\nX-Foo: 3\r\n\r\n', 204],
  ['a line without a colon', 'GET /h HTTP/1.0\r\nX-Foo\r\n\r\n', 204],
  ['several cookies', 'GET /h HTTP/1.0\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n', 204],
  ['trailing spaces in a value', 'GET /h HTTP/1.0\r\nX-Foo:   a b   \r\n\r\n', 204],
];

for (const [what, request, status] of cases) {
  test(`request head: ${what}`, async () => {
    const answer = await same(pair(), request);
    assert.equal(statusOf(answer.text), status, answer.text);
  });
}

test('ignore_invalid_headers off keeps names nginx finds invalid', async () => {
  const answer = await same(pair(), 'GET / HTTP/1.0\r\nX_Under: 1\r\nX.Dot: 2\r\n\r\n', 3000, 8081);
  assert.match(answer.text, /X-Under: \[1\]/);
});

test('several headers of one name join with ", " (nginx 1.23 and later, http_headers_multi.t)', async () => {
  const answer = await same({ gh: pair().gh, ng: undefined }, 'GET /h HTTP/1.0\r\nX-Foo: x\r\nX-Foo: y\r\n\r\n');
  assert.match(answer.text, /X-Foo: \[x, y\]/);
});

test('an HTTP/0.9 request is answered without a head and logged', async () => {
  const answer = await same(pair(), 'GET /nine\r\n');
  assert.equal(answer.text, 'uri=/nine args= is_args= host=localhost request_uri=/nine protocol= method=GET\n');
  const log = await pair().gh.waitForLog('access.log', /"GET \/nine" 200/);
  assert.ok(log);
});

test('the log lines nginx writes for refused heads', async () => {
  await same(pair(), 'GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n');
  await same(pair(), 'get / HTTP/1.0\r\n\r\n');
  await same(pair(), 'GET http://other.test/abs HTTP/1.1\r\n\r\n');
  const lines = pair().gh.logLines().join('\n');
  assert.match(lines, /\[info\] .*client sent duplicate host header: "Host: b", previous value: "Host: a" while reading client request headers, client: 127\.0\.0\.1, server: localhost, request: "GET \/ HTTP\/1\.0"/);
  assert.match(lines, /\[info\] .*client sent invalid method while reading client request line, client: 127\.0\.0\.1, server: localhost, request: "get \/ HTTP\/1\.0"/);
  assert.match(lines, /\[info\] .*client sent HTTP\/1\.1 request without "Host" header while reading client request headers, client: 127\.0\.0\.1, server: localhost, request: "GET http:\/\/other\.test\/abs HTTP\/1\.1"$/m);
});

/**
 * client_header_buffer_size and large_client_header_buffers: where nginx
 * answers 414 (request line) and 400 "Request Header Or Cookie Too Large"
 * (a header line, or all buffers used), with the buffers of the server the
 * Host header chose. Reference test against Debian's nginx.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair, statusOf } from './core-kit.ts';

const pair = sharedPair({
  conf: `
events {}
http {
    access_log off;
    connection_pool_size 128;
    client_header_buffer_size 128;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name five;
        large_client_header_buffers 5 256;
        location / { return 200 "uri=$uri foo=$http_x_foo\\n"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name one;
        large_client_header_buffers 1 256;
        return 204;
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        client_header_buffer_size 1k;
        return 204;
    }
}
`,
});

const line = (name: string, n: number) => `${name}: ${'b'.repeat(n - name.length - 4)}\r\n`;

const cases: Array<[string, string, number, number?]> = [
  ['a long header moves to a large buffer', `GET / HTTP/1.0\r\nHost: five\r\nX-Foo: foo${'1234567890'.repeat(20)}bar\r\n\r\n`, 200],
  ['a long request line moves to a large buffer', `GET /foo${'1234567890'.repeat(20)}bar HTTP/1.0\r\nHost: five\r\n\r\n`, 200],
  ['a request line of 256 bytes fits', `GET /${'a'.repeat(256 - 16)} HTTP/1.0\r\n\r\n`, 200],
  ['a request line of 257 bytes is 414', `GET /${'a'.repeat(257 - 16)} HTTP/1.0\r\n\r\n`, 414],
  ['a very long request line is 414', `GET /${'a'.repeat(5000)} HTTP/1.0\r\n\r\n`, 414],
  ['four buffers of headers', `GET / HTTP/1.0\r\nHost: five\r\n${line('X-A', 250).repeat(4)}\r\n`, 200],
  ['five buffers of headers', `GET / HTTP/1.0\r\nHost: five\r\n${line('X-A', 250).repeat(5)}\r\n`, 200],
  ['six buffers of headers', `GET / HTTP/1.0\r\nHost: five\r\n${line('X-A', 250).repeat(6)}\r\n`, 400],
  ['the Host chooses the buffers: one', `GET / HTTP/1.0\r\nHost: one\r\n${line('X-A', 250).repeat(2)}\r\n`, 400],
  // the empty line after the last header needs room too
  ['a 254-byte header line and the end fit one buffer', `GET / HTTP/1.0\r\nHost: one\r\n${line('X-A', 254)}\r\n`, 204],
  ['a 255-byte header line and the end do not', `GET / HTTP/1.0\r\nHost: one\r\n${line('X-A', 255)}\r\n`, 400],
  ['a header line of 257 bytes', `GET / HTTP/1.0\r\nHost: five\r\n${line('X-A', 257)}\r\n`, 400],
  ['a very long header line', `GET / HTTP/1.0\r\nHost: five\r\n${line('X-A', 3000)}\r\n`, 400],
  ['defaults: an 8,000-byte request line', `GET /${'a'.repeat(8000 - 17)} HTTP/1.0\r\n\r\n`, 204, 8081],
  ['defaults: four 7.5 KiB headers', `GET / HTTP/1.0\r\n${line('X-A', 7680).repeat(4)}\r\n`, 204, 8081],
  ['defaults: five 7.5 KiB headers', `GET / HTTP/1.0\r\n${line('X-A', 7680).repeat(5)}\r\n`, 400, 8081],
];
// the edges of the 128-byte first buffer
for (let k = 92; k <= 100; k++) cases.push([`first buffer edge ${k}`, `GET / HTTP/1.0\r\nHost: one\r\nX: ${'c'.repeat(k)}\r\n\r\n`, 204]);

for (const [what, request, status, port] of cases) {
  test(`header buffers: ${what}`, async () => {
    const answer = await same(pair(), request, 3000, port ?? 8080);
    assert.equal(statusOf(answer.text), status);
    if (status === 400) assert.match(answer.text, /Request Header Or Cookie Too Large/);
  });
}

test('header buffers: the refusals are logged as nginx logs them', async () => {
  const lines = pair().gh.logLines().join('\n');
  assert.match(lines, /\[info\] .*client sent too long URI while reading client request line/);
  assert.match(lines, /\[info\] .*client sent too long header line: "X-A: b+\.\.\." while reading client request headers/);
});

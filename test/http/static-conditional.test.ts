/**
 * Conditional requests (If-Modified-Since, If-None-Match, If-Match,
 * If-Unmodified-Since, if_modified_since) and byte ranges (206, multipart,
 * 416, If-Range, max_ranges) on static files, compared with Debian's nginx
 * 1.22 (the reference) on the same config.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FIXED_MTIME, same, startPair } from './static-kit.ts';

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location /before/ { if_modified_since before; }
        location /off/ { if_modified_since off; }
        location /one/ { max_ranges 1; }
        location /none/ { max_ranges 0; }
        location /noetag/ { etag off; }
    }
}
`;

const alphabet = 'abcdefghijklmnopqrstuvwxyz';
const files = {
  'html/a.txt': alphabet, 'html/before/a.txt': alphabet, 'html/off/a.txt': alphabet,
  'html/one/a.txt': alphabet, 'html/none/a.txt': alphabet, 'html/noetag/a.txt': alphabet,
};
const lm = FIXED_MTIME.toUTCString();
const etag = `"${(FIXED_MTIME.getTime() / 1000).toString(16)}-1a"`;
const req = (path: string, header: string) => `GET ${path} HTTP/1.1\r\nHost: localhost\r\n${header}\r\nConnection: close\r\n\r\n`;

test('conditional GET matches nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const later = new Date(FIXED_MTIME.getTime() + 3600_000).toUTCString();
  const earlier = new Date(FIXED_MTIME.getTime() - 3600_000).toUTCString();

  const nm = await same(t, pair, req('/a.txt', `If-Modified-Since: ${lm}`));
  assert.equal(nm.status, 304);
  assert.equal(nm.header('etag'), etag);
  assert.equal(nm.header('content-length'), undefined);
  assert.equal(nm.body.length, 0);
  assert.equal((await same(t, pair, req('/a.txt', `If-Modified-Since: ${later}`))).status, 200, 'exact match only');
  assert.equal((await same(t, pair, req('/before/a.txt', `If-Modified-Since: ${later}`))).status, 304);
  assert.equal((await same(t, pair, req('/before/a.txt', `If-Modified-Since: ${earlier}`))).status, 200);
  assert.equal((await same(t, pair, req('/off/a.txt', `If-Modified-Since: ${lm}`))).status, 200);
  assert.equal((await same(t, pair, req('/a.txt', 'If-Modified-Since: garbage'))).status, 200);
  assert.equal((await same(t, pair, req('/a.txt', `If-None-Match: ${etag}`))).status, 304);
  assert.equal((await same(t, pair, req('/a.txt', `If-None-Match: "x", W/${etag}`))).status, 304);
  assert.equal((await same(t, pair, req('/a.txt', 'If-None-Match: *'))).status, 304);
  assert.equal((await same(t, pair, req('/a.txt', 'If-None-Match: "other"'))).status, 200);
  assert.equal((await same(t, pair, req('/a.txt', `If-None-Match: "other"\r\nIf-Modified-Since: ${lm}`))).status, 200);
  assert.equal((await same(t, pair, req('/noetag/a.txt', `If-None-Match: ${etag}`))).status, 200);

  assert.equal((await same(t, pair, req('/a.txt', `If-Match: ${etag}`))).status, 200);
  const failed = await same(t, pair, req('/a.txt', 'If-Match: "other"'));
  assert.equal(failed.status, 412);
  assert.match(failed.body.toString(), /412 Precondition Failed/);
  assert.equal((await same(t, pair, req('/a.txt', `If-Match: W/${etag}`))).status, 412);
  assert.equal((await same(t, pair, req('/a.txt', `If-Unmodified-Since: ${lm}`))).status, 200);
  assert.equal((await same(t, pair, req('/a.txt', `If-Unmodified-Since: ${earlier}`))).status, 412);
  assert.equal((await same(t, pair, req('/missing', 'If-Match: "other"'))).status, 404);
  const head = await same(t, pair, `HEAD /a.txt HTTP/1.1\r\nHost: localhost\r\nIf-Match: "x"\r\nConnection: close\r\n\r\n`);
  assert.equal(head.status, 412);
});

test('byte ranges match nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const one = await same(t, pair, req('/a.txt', 'Range: bytes=2-4'));
  assert.equal(one.status, 206);
  assert.equal(one.body.toString(), 'cde');
  assert.equal(one.header('content-range'), 'bytes 2-4/26');
  assert.equal((await same(t, pair, req('/a.txt', 'Range: bytes=-3'))).body.toString(), 'xyz');
  assert.equal((await same(t, pair, req('/a.txt', 'Range: bytes=20-'))).body.toString(), 'uvwxyz');
  assert.equal((await same(t, pair, req('/a.txt', 'Range: bytes=20-100'))).body.toString(), 'uvwxyz');
  const multi = await same(t, pair, req('/a.txt', 'Range: bytes=0-1,5-6'));
  assert.equal(multi.status, 206);
  assert.match(multi.header('content-type') ?? '', /^multipart\/byteranges; boundary=\d{20}$/);
  assert.match(multi.body.toString(), /Content-Range: bytes 0-1\/26\r\n\r\nab\r\n/);
  assert.equal((await same(t, pair, req('/a.txt', 'Range: bytes=0-30,2-3'))).status, 200, 'ranges larger than the file');
  const bad = await same(t, pair, req('/a.txt', 'Range: bytes=30-40'));
  assert.equal(bad.status, 416);
  assert.equal(bad.header('content-range'), 'bytes */26');
  assert.equal((await same(t, pair, req('/a.txt', 'Range: bytes=x-y'))).status, 416);
  assert.equal((await same(t, pair, req('/a.txt', 'Range: pages=1-2'))).status, 200);
  assert.equal((await same(t, pair, req('/a.txt', `Range: bytes=0-0\r\nIf-Range: ${etag}`))).status, 206);
  assert.equal((await same(t, pair, req('/a.txt', 'Range: bytes=0-0\r\nIf-Range: "old"'))).status, 200);
  assert.equal((await same(t, pair, req('/a.txt', `Range: bytes=0-0\r\nIf-Range: ${lm}`))).status, 206);
  assert.equal((await same(t, pair, req('/one/a.txt', 'Range: bytes=0-1,5-6'))).status, 200);
  assert.equal((await same(t, pair, req('/one/a.txt', 'Range: bytes=0-1'))).status, 206);
  const none = await same(t, pair, req('/none/a.txt', 'Range: bytes=0-1'));
  assert.equal(none.status, 200);
  assert.equal(none.header('accept-ranges'), undefined);
  assert.equal((await same(t, pair, `HEAD /a.txt HTTP/1.1\r\nHost: localhost\r\nRange: bytes=1-2\r\nConnection: close\r\n\r\n`)).status, 206);
});

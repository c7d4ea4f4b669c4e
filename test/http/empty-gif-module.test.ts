/**
 * ngx_http_empty_gif_module: the GIF's bytes and headers, HEAD, other
 * methods (405), If-Modified-Since, and where the directive may stand.
 * Reference: Debian's nginx 1.22 on the same configuration.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair } from './locations-kit.ts';
import { httpConf, sameCheck } from './small-modules-kit.ts';

const conf = httpConf(`
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { empty_gif; }
        location /tagged { empty_gif; add_header X-Tag t; expires 1h; }
    }`);

const pair = sharedPair({ conf });

test('GET sends the 43-byte GIF with nginx\'s headers', async () => {
  const r = await same(pair(), 'GET /any/path.gif HTTP/1.1');
  assert.equal(r.status, 200);
  assert.equal(r.header('content-type'), 'image/gif');
  assert.equal(r.header('content-length'), '43');
  assert.equal(r.header('last-modified'), 'Mon, 28 Sep 1970 06:00:00 GMT');
  assert.equal(r.body.toString('hex'), '474946383961010001008001000000' + '00ffffff21f90401000001002c00000000010001000002024c01003b');
});

test('HEAD, other methods, conditional requests and other filters', async () => {
  const head = await same(pair(), 'HEAD / HTTP/1.1');
  assert.equal(head.body.length, 0);
  assert.equal((await same(pair(), 'POST / HTTP/1.1\r\nContent-Length: 0')).status, 405);
  assert.equal((await same(pair(), 'DELETE / HTTP/1.0')).status, 405);
  assert.equal((await same(pair(), 'GET / HTTP/1.1\r\nIf-Modified-Since: Mon, 28 Sep 1970 06:00:00 GMT')).status, 304);
  assert.equal((await same(pair(), 'GET / HTTP/1.1\r\nRange: bytes=0-5')).status, 200);
  const tagged = await same(pair(), 'GET /tagged HTTP/1.1');
  assert.equal(tagged.header('x-tag'), 't');
});

test('configuration: location only, no arguments', async () => {
  for (const body of ['server { empty_gif; }', 'server { location / { empty_gif on; } }', 'server { location / { if ($args) { empty_gif; } } }', 'empty_gif;']) {
    const r = await sameCheck(httpConf(`    ${body}`));
    assert.equal(r.code, 1, body);
  }
});

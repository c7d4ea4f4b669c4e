/**
 * gunzip: gzip-encoded responses (a proxied backend's, gzip_static's) go
 * decompressed to clients that do not take gzip and to SSI includes, and
 * as they are to clients that do; the headers that change (Content-Encoding,
 * Content-Length, Accept-Ranges, ETag, Vary) are nginx's, compared with
 * Debian's nginx 1.22 byte for byte. The backend marks plain files as
 * gzip-encoded with add_header.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { ask, same, startPair } from './static-kit.ts';
import { binaries, confTest } from './limit-kit.ts';

const text = Array.from({ length: 300 }, (_, i) => `line ${i} of the page\n`).join('');
const gz = zlib.gzipSync(text);
// a body large enough that inflate and the socket both push back (backpressure through the filter)
const large = Buffer.from(Array.from({ length: 60000 }, (_, i) => `${i} `.repeat(8)).join('\n'));

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    default_type text/plain;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / {
            gunzip on;
            gzip_vary on;
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
            proxy_set_header Accept-Encoding gzip;
        }
        location /static/ { root %%PREFIX%%/html; gunzip on; gzip_static always; }
        location /buffers/ { root %%PREFIX%%/html; gunzip on; gunzip_buffers 4 1k; gzip_static always; }
        location /off/ { root %%PREFIX%%/html; gzip_static always; }
        location = /page.html { root %%PREFIX%%/html; ssi on; }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location / { add_header Content-Encoding gzip; }
        location /plain/ { }
    }
}
`;

const files = {
  'html/t': gz, 'html/two': Buffer.concat([gz, gz]), 'html/large': zlib.gzipSync(large, { level: 1 }),
  'html/static/t.gz': gz, 'html/buffers/t.gz': gz, 'html/off/t.gz': gz, 'html/empty': zlib.gzipSync(''),
  'html/plain/p.txt': 'not compressed', 'html/page.html': 'before <!--#include virtual="/t" --> after',
};

const get = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: localhost\r\n${extra}Connection: close\r\n\r\n`;
const GZIP = 'Accept-Encoding: gzip\r\n';

test('gunzip decompresses for clients without gzip, as nginx does', async (t) => {
  const pair = await startPair(t, { conf, files });
  const r = await same(t, pair, get('/t'));
  assert.equal(r.body.toString(), text);
  assert.equal(r.header('content-encoding'), undefined);
  assert.equal(r.header('content-length'), undefined);
  assert.equal(r.header('vary'), 'Accept-Encoding');
  assert.match(r.header('etag') ?? '', /^W\//);
  assert.equal((await same(t, pair, get('/two'))).body.toString(), text + text, 'gzip members one after another');
  assert.equal((await same(t, pair, get('/empty'))).body.length, 0);
  const head = await same(t, pair, `HEAD /t HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
  assert.equal(head.header('content-encoding'), undefined);
  assert.equal(head.header('vary'), 'Accept-Encoding');
  for (const path of ['/static/t', '/buffers/t']) assert.equal((await same(t, pair, get(path))).body.toString(), text);
});

test('clients that take gzip get the gzip bytes; gunzip off and plain responses are untouched', async (t) => {
  const pair = await startPair(t, { conf, files });
  const zipped = await same(t, pair, get('/t', GZIP));
  assert.equal(zipped.header('content-encoding'), 'gzip');
  assert.deepEqual(zipped.body, gz);
  // nginx 1.22's gzip_static sends no Accept-Ranges (1.28's does, as Gatehouse): the body only
  const off = await ask(pair.gh, get('/off/t'));
  assert.equal(off.header('content-encoding'), 'gzip');
  assert.deepEqual(off.body, gz);
  const plain = await same(t, pair, get('/plain/p.txt'));
  assert.equal(plain.header('vary'), undefined);
  assert.equal(plain.body.toString(), 'not compressed');
});

test('an SSI include of a gzip response is decompressed even for a client that takes gzip', async (t) => {
  const pair = await startPair(t, { conf, files });
  for (const extra of ['', GZIP]) {
    const r = await same(t, pair, get('/page.html', extra));
    assert.equal(r.body.toString(), `before ${text} after`);
    assert.equal(r.header('content-encoding'), undefined);
  }
});

test('a large body comes out whole through inflate', async (t) => {
  const pair = await startPair(t, { conf, files });
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const r = await ask(srv, get('/large'));
    assert.equal(r.status, 200, srv.flavor);
    assert.ok(r.body.equals(large), `${srv.flavor}: ${r.body.length} of ${large.length} bytes`);
  }
});

test('gunzip_buffers takes a number and a size', () => {
  for (const [name, bin] of binaries()) {
    const errs = (d: string) => confTest(bin, `events {} http { server { listen 127.0.0.1:1; location / { ${d} } } }`);
    assert.match(errs('gunzip_buffers 0 4k;')[0] ?? '', /^invalid value "0 4k" in "gunzip_buffers" directive|"gunzip_buffers" directive invalid value/, name);
    assert.match(errs('gunzip maybe;')[0] ?? '', /^invalid value "maybe" in "gunzip" directive, it must be "on" or "off" in /, name);
    assert.deepEqual(errs('gunzip on; gunzip_buffers 16 8k;'), [], name);
  }
});

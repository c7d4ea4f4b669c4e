/**
 * gzip: which responses are compressed (types, min length, HTTP version,
 * Accept-Encoding with q-values, Via with gzip_proxied, gzip_disable,
 * statuses, HEAD, ranges, conditional requests), the headers that change,
 * and the body, compared with Debian's nginx 1.22 (the reference). The
 * compressed bytes may differ between zlib builds, so bodies are compared
 * after gunzip.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { rawRequest } from '../kit/client.ts';
import type { ParsedResponse } from '../kit/client.ts';
import { ask, comparable, startPair } from './static-kit.ts';
import type { Pair } from './static-kit.ts';
import type { TestContext } from 'node:test';
import { maskNameInBody } from '../kit/server-name.ts';

const big = 'The quick brown fox jumps over the lazy dog. '.repeat(2000);

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    include %%PREFIX%%/mime.types;
    gzip on;
    gzip_types text/css application/json;
    gzip_vary on;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location /level9/ { gzip_comp_level 9; }
        location /http10/ { gzip_http_version 1.0; }
        location /proxied/ { gzip_proxied any; }
        location /disable/ { gzip_disable "curl/" msie6; }
        location /off/ { gzip off; }
        location /min/ { gzip_min_length 1000; }
    }
}
`;

const files = {
  'mime.types': '', 'html/big.html': big, 'html/small.html': 'tiny', 'html/style.css': big, 'html/data.json': big,
  'html/app.js': big, 'html/level9/big.html': big, 'html/http10/big.html': big, 'html/proxied/big.html': big,
  'html/disable/big.html': big, 'html/off/big.html': big, 'html/min/mid.html': 'x'.repeat(500),
};

/** The body decompressed, the server's name masked in it (a compressed page's length is left as it is). */
function unzipped(r: ParsedResponse): string {
  return r.header('content-encoding') === 'gzip' && r.body.length ? maskNameInBody(zlib.gunzipSync(r.body).toString()) : comparable(r).body;
}

/** Same status and headers as nginx, and the same body once decompressed. */
async function sameGzip(t: TestContext, pair: Pair, request: string): Promise<ParsedResponse> {
  const mine = await ask(pair.gh, request);
  if (pair.ng) {
    const ref = await ask(pair.ng, request);
    const a = comparable(mine);
    const b = comparable(ref);
    t.assert.deepStrictEqual({ status: a.status, headers: a.headers, body: unzipped(mine) },
      { status: b.status, headers: b.headers, body: unzipped(ref) }, `same answer as nginx for ${request.split('\r\n')[0]}`);
  }
  return mine;
}

const gz = (path: string, extra = '', version = '1.1', method = 'GET') =>
  `${method} ${path} HTTP/${version}\r\nHost: localhost\r\nAccept-Encoding: gzip, deflate\r\n${extra}Connection: close\r\n\r\n`;

test('gzip compresses what nginx compresses', async (t) => {
  const files2 = { ...files, 'mime.types': 'types { text/html html; text/css css; application/json json; application/javascript js; }' };
  const pair = await startPair(t, { conf, files: files2 });
  const r = await sameGzip(t, pair, gz('/big.html'));
  assert.equal(r.header('content-encoding'), 'gzip');
  assert.equal(r.header('content-length'), undefined);
  assert.equal(r.header('accept-ranges'), undefined);
  assert.equal(r.header('vary'), 'Accept-Encoding');
  assert.match(r.header('etag') ?? '', /^W\/"/);
  assert.equal(unzipped(r), big);
  assert.ok(r.body.length < big.length / 10);
  // the header zlib writes for nginx (deflateInit2 with wbits + 16): XFL 4 for level 1, 2 for level 9
  assert.deepEqual([...r.body.subarray(0, 10)], [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 3], "nginx's gzip header");
  assert.equal((await sameGzip(t, pair, gz('/level9/big.html'))).body[8], 2, 'XFL of level 9');

  assert.equal((await sameGzip(t, pair, gz('/style.css'))).header('content-encoding'), 'gzip');
  assert.equal((await sameGzip(t, pair, gz('/data.json'))).header('content-encoding'), 'gzip');
  assert.equal((await sameGzip(t, pair, gz('/app.js'))).header('content-encoding'), undefined, 'not in gzip_types');
  assert.equal((await sameGzip(t, pair, gz('/small.html'))).header('content-encoding'), undefined, 'below gzip_min_length');
  assert.equal((await sameGzip(t, pair, gz('/min/mid.html'))).header('content-encoding'), undefined);
  assert.equal(unzipped(await sameGzip(t, pair, gz('/level9/big.html'))), big);
  assert.equal((await sameGzip(t, pair, gz('/off/big.html'))).header('content-encoding'), undefined);
  const plain = await sameGzip(t, pair, 'GET /big.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  assert.equal(plain.header('content-encoding'), undefined);
  assert.equal(plain.header('vary'), 'Accept-Encoding');
  for (const ae of ['gzip;q=0', 'gzip; q=0.000', 'x-gzip', 'gzipx', 'deflate']) {
    assert.equal((await sameGzip(t, pair, `GET /big.html HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: ${ae}\r\nConnection: close\r\n\r\n`))
      .header('content-encoding'), undefined, ae);
  }
  for (const ae of ['gzip', 'br, gzip', 'gzip;q=0.5', 'deflate, gzip; q=1']) {
    assert.equal((await sameGzip(t, pair, `GET /big.html HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: ${ae}\r\nConnection: close\r\n\r\n`))
      .header('content-encoding'), 'gzip', ae);
  }
  assert.equal((await sameGzip(t, pair, gz('/big.html', '', '1.0'))).header('content-encoding'), undefined, 'gzip_http_version 1.1');
  assert.equal((await sameGzip(t, pair, gz('/http10/big.html', '', '1.0'))).header('content-encoding'), 'gzip');
  assert.equal((await sameGzip(t, pair, gz('/big.html', 'Via: 1.1 proxy\r\n'))).header('content-encoding'), undefined);
  assert.equal((await sameGzip(t, pair, gz('/proxied/big.html', 'Via: 1.1 proxy\r\n'))).header('content-encoding'), 'gzip');
  assert.equal((await sameGzip(t, pair, gz('/disable/big.html', 'User-Agent: curl/8.0\r\n'))).header('content-encoding'), undefined);
  assert.equal((await sameGzip(t, pair, gz('/disable/big.html', 'User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.0)\r\n')))
    .header('content-encoding'), undefined);
  assert.equal((await sameGzip(t, pair, gz('/disable/big.html', 'User-Agent: Firefox\r\n'))).header('content-encoding'), 'gzip');

  const head = await sameGzip(t, pair, gz('/big.html', '', '1.1', 'HEAD'));
  assert.equal(head.header('content-encoding'), 'gzip');
  assert.equal(head.body.length, 0);
  const nf = await sameGzip(t, pair, gz('/missing.html'));
  assert.equal(nf.status, 404);
  assert.equal(nf.header('content-encoding'), 'gzip');
  const range = await sameGzip(t, pair, gz('/big.html', 'Range: bytes=0-9\r\n'));
  assert.equal(range.status, 200, 'a gzipped response ignores Range');
  const inm = await sameGzip(t, pair, gz('/big.html', `If-None-Match: ${r.header('etag')}\r\n`));
  assert.equal(inm.status, 304);
  assert.equal(inm.header('content-encoding'), undefined);
});

/** The sizes of the chunks of a chunked response, as sent. */
function chunkSizes(raw: Buffer): number[] {
  let at = raw.indexOf('\r\n\r\n') + 4;
  const sizes: number[] = [];
  for (;;) {
    const eol = raw.indexOf('\r\n', at);
    const size = parseInt(raw.subarray(at, eol).toString('latin1'), 16);
    sizes.push(size);
    if (size === 0 || Number.isNaN(size)) return sizes;
    at = eol + 2 + size + 2;
  }
}

test('a small page goes out compressed in one chunk, header and trailer with it, as nginx sends it', async (t) => {
  // bytes that do not compress: 64 KiB of them stay about 64 KiB gzipped
  const noise = crypto.randomBytes(65536);
  const pair = await startPair(t, { conf: conf.replace('gzip_vary on;', 'gzip_vary on;\n    gzip_min_length 0;'), files: { ...files, 'html/noise.html': noise } });
  const request = gz('/small.html');
  const mine = chunkSizes(await rawRequest(pair.gh.port(8080), request));
  assert.equal(mine.length, 2, `chunks ${mine.join(',')}`);
  assert.equal(mine[1], 0);
  if (pair.ng) assert.deepEqual(mine, chunkSizes(await rawRequest(pair.ng.port(8080), request)));
  // output larger than a gzip buffer (4k) is not held to the end: it goes on in several
  const sizes = chunkSizes(await rawRequest(pair.gh.port(8080), gz('/noise.html')));
  assert.ok(sizes.length > 3 && sizes.reduce((a, b) => a + b) > 65536, sizes.join(','));
});

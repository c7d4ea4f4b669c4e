/**
 * ngx_brotli's two modules (brotli filter, brotli_static) against Debian's
 * nginx with libnginx-mod-http-brotli-filter and -static on the same
 * configuration: which responses are compressed (status, types, length,
 * Accept-Encoding with its q values), the headers they get, brotli beside
 * gzip and gzip_static, and $brotli_ratio (the directives' checks are in
 * test/conf/corpus-http-modules.ts). The
 * compressed bytes may differ between brotli library versions, so bodies
 * are compared decompressed.
 */
import { test } from 'node:test';
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import zlib from 'node:zlib';
import type { ParsedResponse } from '../kit/client.ts';
import { ask, comparable, startPair } from './static-kit.ts';
import type { Pair } from './static-kit.ts';

const MODULES = 'load_module /usr/lib/nginx/modules/ngx_http_brotli_filter_module.so;\n'
  + 'load_module /usr/lib/nginx/modules/ngx_http_brotli_static_module.so;\n';

const conf = `${MODULES}
events {}
http {
    server_tokens off;
    types { text/html html; text/plain txt; image/png png; }
    log_format ratio "$uri $brotli_ratio";
    access_log %%PREFIX%%/logs/ratio.log ratio;
    gzip_vary on;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location /br/ { brotli on; brotli_types text/plain; }
        location /both/ { brotli on; gzip on; gzip_types text/plain; brotli_types text/plain; }
        location /level/ { brotli on; brotli_comp_level 0; brotli_window 1k; brotli_min_length 1000; }
        location /static/ { brotli_static on; }
        location /static-gz/ { brotli_static on; gzip_static on; }
        location /always/ { brotli_static always; }
        location /missing/ { brotli on; }
    }
}
`;

const text = 'Compressed on the way out, as ngx_brotli does. '.repeat(200);
const files: Record<string, string | Buffer> = {
  'html/br/a.txt': text, 'html/br/a.html': text, 'html/br/a.png': text, 'html/br/tiny.txt': 'short',
  'html/both/a.txt': text, 'html/level/a.html': text, 'html/level/small.html': 'x'.repeat(500),
  'html/static/a.html': text, 'html/static/a.html.br': zlib.brotliCompressSync(text), 'html/static/plain.html': text,
  'html/static-gz/a.html': text, 'html/static-gz/a.html.gz': zlib.gzipSync(text),
  'html/always/a.html': text, 'html/always/a.html.br': zlib.brotliCompressSync(text),
};

const get = (path: string, ae?: string, method = 'GET') =>
  `${method} ${path} HTTP/1.1\r\nHost: localhost\r\n${ae === undefined ? '' : `Accept-Encoding: ${ae}\r\n`}Connection: close\r\n\r\n`;

/** The body as the client reads it after its Content-Encoding. */
function decoded(r: ParsedResponse): string {
  const enc = r.header('content-encoding');
  if (enc === 'br') return zlib.brotliDecompressSync(r.body).toString();
  if (enc === 'gzip') return zlib.gunzipSync(r.body).toString();
  return r.body.toString();
}

/** Status, headers but the compressed length, and the decoded body: the same from both servers. */
async function same(t: TestContext, pair: Pair, request: string): Promise<ParsedResponse> {
  const view = (r: ParsedResponse) => {
    const c = comparable(r);
    const compressed = r.header('content-encoding') !== undefined && r.header('content-length') === undefined;
    return {
      status: c.status,
      // a .gz goes in byte ranges in Gatehouse as in nginx 1.23.4 and later (test/http/gzip-static.test.ts)
      headers: c.headers.filter((h) => !(compressed && /^transfer-encoding:/i.test(h)) && !(r.header('content-encoding') === 'gzip' && /^accept-ranges:/i.test(h))),
      body: decoded(r).replace(/<center>(nginx|gatehouse)[^<]*<\/center>/, '<center>SERVER</center>'),
    };
  };
  const mine = await ask(pair.gh, request);
  if (pair.ng) t.assert.deepStrictEqual(view(mine), view(await ask(pair.ng, request)), `same answer as nginx for ${request.split('\r\n')[0]} ${request.split('\r\n')[2]}`);
  return mine;
}

test('brotli compresses what nginx with ngx_brotli compresses', async (t) => {
  const pair = await startPair(t, { conf, files });
  const br = await same(t, pair, get('/br/a.txt', 'gzip, deflate, br'));
  assert.equal(br.header('content-encoding'), 'br');
  assert.equal(br.header('content-length'), undefined);
  assert.equal(br.header('vary'), 'Accept-Encoding');
  assert.match(br.header('etag') ?? '', /^W\//);
  assert.equal(decoded(br), text);
  assert.equal((await same(t, pair, get('/br/a.html', 'br'))).header('content-encoding'), 'br', 'text/html always');
  assert.equal((await same(t, pair, get('/br/a.png', 'br'))).header('content-encoding'), undefined, 'a type not listed');
  assert.equal((await same(t, pair, get('/br/tiny.txt', 'br'))).header('content-encoding'), undefined, 'below brotli_min_length');
  assert.equal((await same(t, pair, get('/br/a.txt', 'gzip'))).header('vary'), 'Accept-Encoding', 'not asked for: still varies');
  for (const ae of ['br;q=0', 'br; q=0.000', 'br;q=0.', 'gzip, br;q=0.0', 'brotli', 'xbr']) {
    assert.equal((await same(t, pair, get('/br/a.txt', ae))).header('content-encoding'), undefined, ae);
  }
  for (const ae of ['BR', 'br;q=0.001', 'br;q=1', 'br ;q=0.5', 'gzip,br']) {
    assert.equal((await same(t, pair, get('/br/a.txt', ae))).header('content-encoding'), 'br', ae);
  }
  assert.equal((await same(t, pair, get('/missing/nothing.html', 'br'))).status, 404);
  const head = await ask(pair.gh, get('/br/a.txt', 'br', 'HEAD').replace('HEAD', 'HEAD'));
  assert.equal(head.status, 200);
});

test('brotli before gzip; its level, window and minimum length; $brotli_ratio', async (t) => {
  const pair = await startPair(t, { conf, files });
  assert.equal((await same(t, pair, get('/both/a.txt', 'gzip, br'))).header('content-encoding'), 'br');
  assert.equal((await same(t, pair, get('/both/a.txt', 'gzip'))).header('content-encoding'), 'gzip');
  assert.equal((await same(t, pair, get('/level/a.html', 'br'))).header('content-encoding'), 'br');
  assert.equal((await same(t, pair, get('/level/small.html', 'br'))).header('content-encoding'), undefined);
  const ratio = (srv: Pair['gh']) => fs.readFileSync(`${srv.prefix}/logs/ratio.log`, 'utf8').trim().split('\n');
  for (const srv of [pair.gh, ...(pair.ng ? [pair.ng] : [])]) {
    const [br, gz, level, small] = ratio(srv).slice(-4).map((l) => l.split(' '));
    assert.match(br[1], /^\d+\.\d\d$/, `${srv.flavor}: a ratio for the brotli response`);
    assert.ok(Number(br[1]) > 10, `${srv.flavor}: repeated text compresses well (${br[1]})`);
    assert.equal(gz[1], '-', `${srv.flavor}: no brotli ratio for gzip`);
    assert.ok(Number(level[1]) > 1, `${srv.flavor}: level 0 still compresses`);
    assert.equal(small[1], '-');
  }
});

test('brotli_static sends file.br as nginx with ngx_brotli does', async (t) => {
  const pair = await startPair(t, { conf, files });
  const br = await same(t, pair, get('/static/a.html', 'gzip, br'));
  assert.equal(br.header('content-encoding'), 'br');
  assert.equal(br.header('content-type'), 'text/html');
  assert.deepEqual(br.body, zlib.brotliCompressSync(text), 'sent as stored');
  assert.equal(br.header('vary'), 'Accept-Encoding');
  // Debian's ngx_brotli (1.0.0rc) adds Vary only where it sends a .br
  assert.equal((await same(t, pair, get('/static/a.html', 'gzip'))).header('vary'), undefined);
  assert.equal((await same(t, pair, get('/static/plain.html', 'br'))).header('vary'), undefined);
  assert.equal((await same(t, pair, get('/always/a.html'))).header('content-encoding'), 'br');
  // no .br: gzip_static sends its .gz to a client that takes both
  assert.equal((await same(t, pair, get('/static-gz/a.html', 'gzip, br'))).header('content-encoding'), 'gzip');
  assert.equal((await same(t, pair, get('/static-gz/a.html', 'gzip'))).header('content-encoding'), 'gzip');
});

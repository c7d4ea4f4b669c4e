/**
 * gzip_static: when the precompressed file.gz is sent (on/always, the gzip
 * module's Accept-Encoding, HTTP version, Via and User-Agent checks), the
 * Vary line gzip_vary adds once a .gz exists, what happens without one, and
 * the .gz with ranges, HEAD and conditional requests, beside the gzip
 * filter. Compared with Debian's nginx 1.22 (the reference); a .gz is sent
 * as stored, so the bodies match byte for byte. One difference is nginx's
 * own since 1.23.4 ("Gzip static: ranges support", ticket #2349), which
 * Gatehouse follows: a .gz is sent with Accept-Ranges and in byte ranges.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import type { TestContext } from 'node:test';
import type { ParsedResponse } from '../kit/client.ts';
import { ask, comparable, startPair } from './static-kit.ts';
import type { Pair } from './static-kit.ts';

/** Same answer as nginx 1.22 but for the Accept-Ranges line nginx 1.23.4 added to a .gz (checked here on ours). */
async function same(t: TestContext, pair: Pair, request: string): Promise<ParsedResponse> {
  const mine = await ask(pair.gh, request);
  if (pair.ng) {
    const ref = await ask(pair.ng, request);
    const withoutRanges = (r: ParsedResponse) => {
      const c = comparable(r);
      return { ...c, headers: c.headers.filter((h) => !/^accept-ranges:/i.test(h) || r.header('content-encoding') !== 'gzip') };
    };
    t.assert.deepStrictEqual(withoutRanges(mine), withoutRanges(ref), `same answer as nginx for ${request.split('\r\n')[0]}`);
  }
  return mine;
}

const plain = 'Precompressed, and served as stored. '.repeat(100);
const packed = zlib.gzipSync(plain);

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    types { text/html html; text/css css; }
    gzip_vary on;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location /on/ { gzip_static on; }
        location /always/ { gzip_static always; }
        location /novary/ { gzip_static on; gzip_vary off; }
        location /http10/ { gzip_static on; gzip_http_version 1.0; }
        location /proxied/ { gzip_static on; gzip_proxied any; }
        location /disable/ { gzip_static on; gzip_disable "curl/"; }
        location /both/ { gzip_static on; gzip on; gzip_min_length 1; }
        location /upper/ { gzip_static ON; }
    }
}
`;

const files: Record<string, string | Buffer> = {};
for (const dir of ['on', 'always', 'novary', 'http10', 'proxied', 'disable', 'both', 'upper']) {
  files[`html/${dir}/a.html`] = plain;
  files[`html/${dir}/a.html.gz`] = packed;
  files[`html/${dir}/plain.html`] = plain;
}
files['html/on/style.css'] = 'body {}\n';
files['html/on/style.css.gz'] = zlib.gzipSync('body {}\n');
files['html/on/dir.html'] = plain;
files['html/on/dir.html.gz/x'] = 'a directory named like a .gz';

const get = (path: string, extra = '', version = '1.1', method = 'GET') =>
  `${method} ${path} HTTP/${version}\r\nHost: localhost\r\n${extra}Connection: close\r\n\r\n`;
const AE = 'Accept-Encoding: gzip, deflate\r\n';

test('gzip_static sends file.gz as nginx does', async (t) => {
  const pair = await startPair(t, { conf, files });
  const gz = await same(t, pair, get('/on/a.html', AE));
  assert.equal(gz.header('content-encoding'), 'gzip');
  assert.equal(gz.header('content-type'), 'text/html', "the original's type, not the .gz's");
  assert.equal(gz.header('content-length'), String(packed.length));
  assert.equal(gz.header('vary'), 'Accept-Encoding');
  assert.equal(gz.header('accept-ranges'), 'bytes', 'nginx 1.23.4 and later');
  assert.deepEqual(gz.body, packed);
  const css = await same(t, pair, get('/on/style.css', AE));
  assert.equal(css.header('content-type'), 'text/css');
  assert.equal(zlib.gunzipSync(css.body).toString(), 'body {}\n');

  const noAe = await same(t, pair, get('/on/a.html'));
  assert.equal(noAe.header('content-encoding'), undefined);
  assert.equal(noAe.header('vary'), 'Accept-Encoding', 'a .gz exists, so the answer varies');
  assert.equal(noAe.body.toString(), plain);
  const noGz = await same(t, pair, get('/on/plain.html', AE));
  assert.equal(noGz.header('vary'), undefined, 'no .gz: nothing varies');
  assert.equal(noGz.body.toString(), plain);
  assert.equal((await same(t, pair, get('/on/dir.html', AE))).body.toString(), plain, 'a directory named .gz is passed over');
  assert.equal((await same(t, pair, get('/on/a.html', 'Accept-Encoding: gzip;q=0\r\n'))).header('content-encoding'), undefined);
  assert.equal((await same(t, pair, get('/on/a.html', AE, '1.1', 'POST'))).status, 405);
  assert.equal((await same(t, pair, get('/upper/a.html', AE))).header('content-encoding'), 'gzip', 'the value is read without case');
});

test('gzip_static always, gzip_vary, and the gzip checks as nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const always = await same(t, pair, get('/always/a.html'));
  assert.equal(always.header('content-encoding'), 'gzip');
  assert.equal(always.header('vary'), undefined, '`always` does not vary');
  const novary = await same(t, pair, get('/novary/a.html'));
  assert.equal(novary.header('vary'), undefined);
  assert.equal(novary.header('content-encoding'), undefined);
  assert.equal((await same(t, pair, get('/novary/a.html', AE))).header('content-encoding'), 'gzip');

  const http10 = await same(t, pair, get('/on/a.html', AE, '1.0'));
  assert.equal(http10.header('content-encoding'), undefined, 'gzip_http_version 1.1 (the default)');
  assert.equal((await same(t, pair, get('/http10/a.html', AE, '1.0'))).header('content-encoding'), 'gzip');
  assert.equal((await same(t, pair, get('/on/a.html', `${AE}Via: 1.1 cache\r\n`))).header('content-encoding'), undefined);
  assert.equal((await same(t, pair, get('/proxied/a.html', `${AE}Via: 1.1 cache\r\n`))).header('content-encoding'), 'gzip');
  assert.equal((await same(t, pair, get('/disable/a.html', `${AE}User-Agent: curl/8\r\n`))).header('content-encoding'), undefined);
  assert.equal((await same(t, pair, get('/disable/a.html', `${AE}User-Agent: Mozilla/5.0\r\n`))).header('content-encoding'), 'gzip');
});

test('file.gz with HEAD, ranges and conditionals, and beside the gzip filter, as nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const head = await same(t, pair, get('/on/a.html', AE, '1.1', 'HEAD'));
  assert.equal(head.header('content-length'), String(packed.length));
  // nginx 1.23.4 and later (not the reference's 1.22): a .gz in ranges
  const range = await ask(pair.gh, get('/on/a.html', `${AE}Range: bytes=0-9\r\n`));
  assert.equal(range.status, 206);
  assert.equal(range.header('content-range'), `bytes 0-9/${packed.length}`);
  assert.deepEqual(range.body, packed.subarray(0, 10));
  const etag = (await same(t, pair, get('/on/a.html', AE))).header('etag')!;
  assert.equal((await same(t, pair, get('/on/a.html', `${AE}If-None-Match: ${etag}\r\n`))).status, 304);

  const both = await same(t, pair, get('/both/a.html', AE));
  assert.deepEqual(both.body, packed, 'the gzip filter leaves a .gz alone');
  assert.deepEqual(both.headerAll('vary'), ['Accept-Encoding']);
  // compressed by the gzip filter: Node's zlib and nginx's may pack the same bytes differently
  const filtered = await ask(pair.gh, get('/both/plain.html', AE));
  if (pair.ng) assert.deepEqual(comparable(filtered).headers, comparable(await ask(pair.ng, get('/both/plain.html', AE))).headers);
  assert.equal(zlib.gunzipSync(filtered.body).toString(), plain);
  assert.deepEqual(filtered.headerAll('vary'), ['Accept-Encoding']);
  const bothNoAe = await same(t, pair, get('/both/a.html'));
  assert.deepEqual(bothNoAe.headerAll('vary'), ['Accept-Encoding'], 'one Vary line when both modules vary');
});

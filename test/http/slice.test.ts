/**
 * slice: one client request becomes SIZE-aligned range requests to the
 * origin (`proxy_set_header Range $slice_range`), each cached as its own
 * entry (`$slice_range` in the key). A Node origin in this process answers
 * ranges and notes the Range of every request it gets, so the test sees
 * which slices each server fetched. Every answer, and the slices fetched
 * for it, are compared with Debian's nginx given the same configuration
 * (each server has its own cache; the origin is shared, asked by one
 * server at a time).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ask, comparable, logLines, startPair } from './static-kit.ts';
import type { Pair } from './static-kit.ts';
import type { RunningServer } from '../kit/server.ts';
import { rawRequest } from '../kit/client.ts';
import { maskServerName } from '../kit/server-name.ts';

const SIZE = 5000;
// letters only: the comparison masks long digit runs
const body = Buffer.from(Array.from({ length: SIZE }, (_, i) => String.fromCharCode(97 + ((i * 7 + (i >> 5)) % 26))).join(''));

/** The origin: `Range: bytes=A-B` answered with a 206, except where the path says otherwise. */
async function startOrigin(t: { after(fn: () => unknown): void }): Promise<{ port: number; seen: string[] }> {
  const seen: string[] = [];
  const srv = http.createServer((req, res) => {
    const url = req.url ?? '/';
    const range = req.headers.range;
    seen.push(`${url} ${range ?? '-'}`);
    // the ETag changes after the first slice of a file under /etag/
    const etag = url.startsWith('/etag/') && range !== undefined && !range.startsWith('bytes=0-') ? '"v2"' : '"v1"';
    const m = /^bytes=(\d+)-(\d+)$/.exec(range ?? '');
    res.setHeader('Content-Type', 'text/plain');
    res.setHeader('ETag', etag);
    if (!m || url.startsWith('/norange/')) {
      res.setHeader('Content-Length', SIZE);
      res.end(body);
      return;
    }
    const start = Number(m[1]);
    const end = Math.min(Number(m[2]), SIZE - 1);
    res.statusCode = 206;
    res.setHeader('Content-Range', `bytes ${start}-${end}/${SIZE}`);
    res.setHeader('Content-Length', end - start + 1);
    res.end(body.subarray(start, end + 1));
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => { srv.closeAllConnections(); srv.close(() => resolve()); }));
  return { port: (srv.address() as AddressInfo).port, seen };
}

const conf = (origin: number) => `
events {}
http {
    access_log off;
    proxy_temp_path %%PREFIX%%/proxy_temp;
    proxy_cache_path %%PREFIX%%/cache keys_zone=slices:1m;
    proxy_cache_key $uri$is_args$args$slice_range;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / {
            slice 1k;
            proxy_pass http://127.0.0.1:${origin};
            proxy_set_header Range $slice_range;
            proxy_cache slices;
            proxy_cache_valid 200 206 1h;
            add_header X-Cache-Status $upstream_cache_status;
        }
        location /sub/ {
            slice 1k;
            proxy_pass http://127.0.0.1:${origin};
            proxy_set_header Range $slice_range;
            sub_filter bipw BIPW;
            sub_filter_types *;
        }
        location /etag/ {
            slice 2k;
            proxy_pass http://127.0.0.1:${origin};
            proxy_set_header Range $slice_range;
        }
    }
}
`;

const get = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: localhost\r\n${extra}Connection: close\r\n\r\n`;

/** Asks each server in turn; the answers and the origin requests each caused must be nginx's. */
async function same(pair: Pair, origin: { seen: string[] }, request: string): Promise<{ status: number; body: string; header(n: string): string | undefined; seen: string[] }> {
  origin.seen.length = 0;
  const mine = await ask(pair.gh, request);
  const seen = origin.seen.splice(0);
  if (pair.ng) {
    const ref = await ask(pair.ng, request);
    assert.deepStrictEqual(comparable(mine), comparable(ref), `same answer as nginx for ${request.split('\r\n')[0]}`);
    assert.deepStrictEqual(seen, origin.seen.splice(0), `same origin requests as nginx for ${request.split('\r\n')[0]}`);
  }
  return { status: mine.status, body: mine.body.toString('latin1'), header: (n) => mine.header(n), seen };
}

const slices = (path: string, ...starts: number[]) => starts.map((s) => `${path} bytes=${s}-${s + 1023}`);

test('slice fetches and caches 1k slices, answers whole files and client ranges as nginx does', async (t) => {
  const origin = await startOrigin(t);
  const pair = await startPair(t, { conf: conf(origin.port) });

  // the whole file: five slices, one after another, put together as a 200 of the full length
  let r = await same(pair, origin, get('/f'));
  assert.equal(r.status, 200);
  assert.equal(r.header('content-length'), String(SIZE));
  assert.equal(r.body, body.toString('latin1'));
  assert.equal(r.header('x-cache-status'), 'MISS');
  assert.equal(r.header('content-range'), undefined);
  assert.deepEqual(r.seen, slices('/f', 0, 1024, 2048, 3072, 4096));

  // again: every slice from the cache, the origin asked nothing
  r = await same(pair, origin, get('/f'));
  assert.equal(r.header('x-cache-status'), 'HIT');
  assert.equal(r.body, body.toString('latin1'));
  assert.deepEqual(r.seen, []);

  // a client range across slice boundaries: only the slices it touches
  r = await same(pair, origin, get('/g', 'Range: bytes=1000-2100\r\n'));
  assert.equal(r.status, 206);
  assert.equal(r.header('content-range'), `bytes 1000-2100/${SIZE}`);
  assert.equal(r.body, body.toString('latin1', 1000, 2101));
  assert.deepEqual(r.seen, slices('/g', 0, 1024, 2048));

  // a range inside a cached slice, then one reaching past the cached ones: only the missing slice is fetched
  r = await same(pair, origin, get('/g', 'Range: bytes=2500-2600\r\n'));
  assert.equal(r.body, body.toString('latin1', 2500, 2601));
  assert.deepEqual(r.seen, []);
  r = await same(pair, origin, get('/g', 'Range: bytes=3000-3100\r\n'));
  assert.equal(r.body, body.toString('latin1', 3000, 3101));
  assert.deepEqual(r.seen, slices('/g', 3072));

  // a suffix range starts at the slice of its first byte
  r = await same(pair, origin, get('/h', 'Range: bytes=-10\r\n'));
  assert.equal(r.status, 206);
  assert.equal(r.body, body.toString('latin1', SIZE - 10));

  // several ranges: one range only with slices, so the whole file as a 200
  r = await same(pair, origin, get('/i', 'Range: bytes=1-2,3000-3001\r\n'));
  assert.equal(r.status, 200);
  assert.equal(r.body, body.toString('latin1'));
});

test('an origin that ignores Range: its 200 passes as it is', async (t) => {
  const origin = await startOrigin(t);
  const pair = await startPair(t, { conf: conf(origin.port) });
  const r = await same(pair, origin, get('/norange/f'));
  assert.equal(r.status, 200);
  assert.equal(r.body, body.toString('latin1'));
  assert.deepEqual(r.seen, ['/norange/f bytes=0-1023']);
});

test('sub_filter works on each slice by itself, as nginx\'s does', async (t) => {
  const origin = await startOrigin(t);
  const pair = await startPair(t, { conf: conf(origin.port) });
  const r = await same(pair, origin, get('/sub/f'));
  assert.equal(r.status, 200);
  // sub_filter_once: the first match of each slice (each slice's subrequest has its own filter state)
  assert.equal(r.body.split('BIPW').length - 1, 5);
  assert.equal(r.body.replaceAll('BIPW', 'bipw'), body.toString('latin1'));
});

/** What a client read, with Date and the server's name masked. */
async function rawMasked(srv: RunningServer, request: string): Promise<string> {
  const raw = (await rawRequest(srv.port(8080), request)).toString('latin1');
  return maskServerName(raw).replace(/^Date: .*\r\n/m, '');
}

test('an ETag that changes after the first slice cuts the response short, as nginx does', async (t) => {
  const origin = await startOrigin(t);
  const pair = await startPair(t, { conf: conf(origin.port) });
  const mine = await rawMasked(pair.gh, get('/etag/f'));
  // the head and the first slice went out; the second slice's answer is refused
  assert.match(mine, /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(mine, /\r\nContent-Length: 5000\r\n/);
  assert.equal(mine.slice(mine.indexOf('\r\n\r\n') + 4), body.toString('latin1', 0, 2048));
  await pair.gh.waitForLog('error.log', /etag mismatch in slice response/);
  assert.equal(logLines(pair.gh, /\[error\].*etag mismatch in slice response/).length, 1);
  if (pair.ng) {
    assert.equal(mine, await rawMasked(pair.ng, get('/etag/f')));
    await pair.ng.waitForLog('error.log', /etag mismatch in slice response/);
  }
});

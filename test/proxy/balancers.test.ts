/**
 * The load-balancing methods besides round robin: ip_hash, hash (plain and
 * consistent), least_conn and random. Reference: Debian's nginx on the same
 * configuration — the same requests must reach the same servers (random:
 * every server is used, and only servers of the group).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { parseResponse, rawRequest } from '../kit/client.ts';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, replyWith, response, startPair } from './upstream-kit.ts';
import type { Pair } from './upstream-kit.ts';

const ups: RawUpstream[] = [];
let pair: Pair;
const stops: Array<() => unknown> = [];

before(async () => {
  for (let i = 0; i < 4; i++) ups.push(await RawUpstream.start(replyWith(response(`u${i}`))));
  const servers = (extra: string[]) => ups.map((u, i) => `server ${u.address}${extra[i] ?? ''};`).join(' ');
  pair = await startPair({ after: (fn) => { stops.push(fn); } }, { conf: `
events {}
http {
${HTTP_COMMON}
    upstream iphash { ip_hash; ${servers([])} }
    upstream hashed { hash $arg_k; ${servers([' weight=2'])} }
    upstream chash { hash $arg_k consistent; ${servers(['', ' weight=3'])} }
    upstream least { least_conn; ${servers(['', ' weight=2'])} }
    upstream rand { random two; ${servers([])} }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location /iphash/ { proxy_pass http://iphash; }
        location /hash/ { proxy_pass http://hashed; }
        location /chash/ { proxy_pass http://chash; }
        location /least/ { proxy_pass http://least; }
        location /random/ { proxy_pass http://rand; }
    }
}
` });
});

after(async () => {
  await Promise.all(stops.map((s) => s()));
  for (const u of ups) await u.close();
});

async function picks(srv: RunningServer, uri: (i: number) => string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = parseResponse(await rawRequest(srv.port(8080), `GET ${uri(i)} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`));
    out.push(r.body.toString());
  }
  return out;
}

async function same(uri: (i: number) => string, n: number): Promise<string[]> {
  const gh = await picks(pair.gh, uri, n);
  if (pair.ng) assert.deepEqual(gh, await picks(pair.ng, uri, n), 'servers picked (gatehouse vs nginx)');
  return gh;
}

test('ip_hash: one client address, one server', async () => {
  const got = await same(() => '/iphash/', 4);
  assert.equal(new Set(got).size, 1);
});

test('hash $arg_k: keys map to servers as nginx maps them', async () => {
  const got = await same((i) => `/hash/?k=key${i}`, 12);
  assert.ok(new Set(got).size > 1);
});

test('hash ... consistent: the ketama ring', async () => {
  const got = await same((i) => `/chash/?k=item${i}`, 12);
  assert.ok(new Set(got).size > 1);
});

test('least_conn: ties broken by weighted round robin', async () => {
  await same(() => '/least/', 8);
});

test('random two: only the group\'s servers, all of them in time', async () => {
  const got = await picks(pair.gh, () => '/random/', 40);
  assert.ok(got.every((b) => /^u[0-3]$/.test(b)));
  assert.equal(new Set(got).size, 4);
});

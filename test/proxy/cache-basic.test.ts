/**
 * proxy_cache: what the client and the upstream see, against Debian's nginx
 * on the same configuration — MISS then HIT, what upstream headers forbid
 * caching (Cache-Control, Set-Cookie, X-Accel-Expires), expiry, bypass,
 * proxy_no_cache, min_uses, use_stale on a dead upstream, and the files in
 * nginx's `levels=` layout.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { parseResponse, rawRequest } from '../kit/client.ts';
import { nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, response, sleep } from './upstream-kit.ts';

const HEADERS: Record<string, string[]> = {
  '/plain': ['X-Up: yes'],
  '/nocache': ['Cache-Control: no-cache'],
  '/private': ['Cache-Control: private, max-age=60'],
  '/cookie': ['Set-Cookie: a=b'],
  '/xae0': ['X-Accel-Expires: 0'],
  '/short': ['Cache-Control: max-age=1'],
  '/expires': ['Expires: Thu, 01 Jan 1970 00:00:01 GMT'],
  '/ignored': ['Set-Cookie: a=b', 'Cache-Control: no-cache'],
  '/notfound': [],
};

function upstream(): Promise<RawUpstream> {
  let n = 0;
  return RawUpstream.start((req, socket) => {
    n++;
    const p = req.uri.split('?')[0].replace(/^\/[a-z]+(?=\/)/, '');
    const status = p === '/notfound' ? '404 Not Found' : '200 OK';
    socket.end(response(`body ${n}`, status, HEADERS[p] ?? []), 'latin1');
  });
}

const conf = (up: string, dead: string) => `
events {}
http {
${HTTP_COMMON}
    proxy_cache_path %%PREFIX%%/cache levels=1:2 keys_zone=one:1m inactive=1h;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        add_header X-Cache $upstream_cache_status always;
        proxy_cache one;
        proxy_cache_valid 200 1m;
        location / {
            proxy_cache_bypass $http_x_bypass;
            proxy_no_cache $arg_nostore;
            proxy_pass http://${up};
        }
        location /ign/ {
            proxy_ignore_headers Set-Cookie Cache-Control;
            proxy_pass http://${up};
        }
        location /twice/ {
            proxy_cache_min_uses 2;
            proxy_pass http://${up};
        }
        location /any/ {
            proxy_cache_valid any 1m;
            proxy_pass http://${up};
        }
        location /stale/ {
            proxy_cache_key stale$uri;
            proxy_cache_use_stale error timeout;
            proxy_pass http://$arg_up;
        }
    }
}
`;

async function get(port: number, uri: string, extra = ''): Promise<{ status: number; body: string; cache: string | undefined; header: (n: string) => string | undefined }> {
  const r = parseResponse(await rawRequest(port, `GET ${uri} HTTP/1.0\r\nHost: localhost\r\n${extra}\r\n`));
  return { status: r.status, body: r.body.toString(), cache: r.header('x-cache'), header: (n) => r.header(n) };
}

for (const [name, start, skip] of [['gatehouse', startGatehouse, false], ['nginx', startNginx, nginxSkip]] as const) {
  test(`proxy_cache basics (${name})`, { skip }, async (t) => {
    const up = await upstream();
    const deadUp = await RawUpstream.start((req, socket) => { socket.end(response('fresh', '200 OK', ['X-Accel-Expires: 1']), 'latin1'); });
    t.after(() => up.close());
    let deadClosed = false;
    t.after(() => (deadClosed ? undefined : deadUp.close()));
    const srv: RunningServer = await start({ conf: conf(up.address, deadUp.address) });
    t.after(() => srv.stop());
    const port = srv.port(8080);
    const seq = async (uri: string, n = 2, extra = '') => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) {
        const r = await get(port, uri, extra);
        out.push(`${r.status} ${r.cache} ${r.body}`);
      }
      return out;
    };
    const before = () => up.requests.length;

    let b = before();
    assert.deepEqual(await seq('/plain'), [`200 MISS body ${b + 1}`, `200 HIT body ${b + 1}`]);
    const hit = await get(port, '/plain');
    assert.equal(hit.header('x-up'), 'yes');
    assert.equal(hit.header('content-length'), String(`body ${b + 1}`.length));
    assert.equal(up.requests.length, b + 1);

    for (const uri of ['/nocache', '/private', '/cookie', '/xae0', '/expires']) {
      b = before();
      assert.deepEqual(await seq(uri), [`200 MISS body ${b + 1}`, `200 MISS body ${b + 2}`], uri);
    }

    b = before();
    assert.deepEqual(await seq('/ign/ignored'), [`200 MISS body ${b + 1}`, `200 HIT body ${b + 1}`]);

    // 404 is not in `proxy_cache_valid 200`; `any` covers it
    b = before();
    assert.deepEqual(await seq('/notfound'), [`404 MISS body ${b + 1}`, `404 MISS body ${b + 2}`]);
    b = before();
    assert.deepEqual(await seq('/any/notfound'), [`404 MISS body ${b + 1}`, `404 HIT body ${b + 1}`]);

    b = before();
    assert.deepEqual(await seq('/short'), [`200 MISS body ${b + 1}`, `200 HIT body ${b + 1}`]);
    await sleep(2100);
    assert.deepEqual(await seq('/short'), [`200 EXPIRED body ${b + 2}`, `200 HIT body ${b + 2}`]);

    b = before();
    assert.deepEqual(await seq('/plain?x=1', 2, 'X-Bypass: 1\r\n'), [`200 BYPASS body ${b + 1}`, `200 BYPASS body ${b + 2}`]);
    // a bypassed response is stored
    assert.deepEqual(await seq('/plain?x=1', 1), [`200 HIT body ${b + 2}`]);
    b = before();
    assert.deepEqual(await seq('/plain?x=2&nostore=1'), [`200 MISS body ${b + 1}`, `200 MISS body ${b + 2}`]);

    b = before();
    assert.deepEqual(await seq('/twice/plain', 3), [`200 MISS body ${b + 1}`, `200 MISS body ${b + 2}`, `200 HIT body ${b + 2}`]);

    // nginx's layout: md5 of the key, levels=1:2 taken from the end of the name
    const md5 = crypto.createHash('md5').update(`http://${up.address}/plain`).digest('hex');
    const file = srv.prefix + `/cache/${md5.slice(-1)}/${md5.slice(-3, -1)}/${md5}`;
    assert.ok(fs.existsSync(file), file);
    assert.match(fs.readFileSync(file, 'latin1'), /KEY: http[^\n]*\/plain\n/);

    // use_stale: the upstream dies after the response expired
    const addr = deadUp.address;
    assert.deepEqual(await seq(`/stale/x?up=${addr}`, 2), ['200 MISS fresh', '200 HIT fresh']);
    await deadUp.close();
    deadClosed = true;
    await sleep(2100);
    assert.deepEqual(await seq(`/stale/x?up=${addr}`, 1), ['200 STALE fresh']);
  });
}

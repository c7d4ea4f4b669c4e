/**
 * proxy_cache beyond the basics, against Debian's nginx on the same
 * configuration: proxy_cache_lock (parallel requests wait for the first),
 * proxy_cache_revalidate (a 304 renews the entry: REVALIDATED), Vary
 * (variants side by side), conditional request fields not passed
 * upstream, stale-if-error, a cached response served in a byte range.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseResponse, rawRequest } from '../kit/client.ts';
import { nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, response, sleep } from './upstream-kit.ts';

const LM = 'Mon, 02 Jan 2023 00:00:00 GMT';

function upstream(): Promise<RawUpstream> {
  let n = 0;
  return RawUpstream.start(async (req, socket) => {
    n++;
    const p = req.uri.split('?')[0];
    const ims = req.headers.find(([k]) => k.toLowerCase() === 'if-modified-since')?.[1];
    if (p.startsWith('/slow')) await sleep(300);
    if (p.startsWith('/reval2') && ims === LM) {
      socket.end('HTTP/1.1 304 Not Modified\r\nConnection: close\r\n\r\n', 'latin1');
      return;
    }
    if (p.startsWith('/reval') && ims === LM) {
      socket.end('HTTP/1.1 304 Not Modified\r\nCache-Control: max-age=1\r\nConnection: close\r\n\r\n', 'latin1');
      return;
    }
    const headers = p.startsWith('/reval') ? ['Cache-Control: max-age=1', `Last-Modified: ${LM}`] : p.startsWith('/vary') ? ['Vary: Accept-Language'] : p.startsWith('/range') ? ['Accept-Ranges: bytes'] : p.startsWith('/bg') ? ['Cache-Control: max-age=1'] : [];
    socket.end(response(`${req.method} ${n} ims=${ims ?? '-'}`, '200 OK', headers), 'latin1');
  });
}

const conf = (up: string) => `
events {}
http {
${HTTP_COMMON}
    proxy_cache_path %%PREFIX%%/cache keys_zone=one:1m;
    proxy_cache_path %%PREFIX%%/short keys_zone=short:1m inactive=1s;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        add_header X-Cache $upstream_cache_status always;
        proxy_cache one;
        proxy_cache_valid 200 1m;
        location / { proxy_pass http://${up}; }
        location /slow { proxy_cache_lock on; proxy_pass http://${up}; }
        location /reval { proxy_cache_revalidate on; proxy_pass http://${up}; }
        location /reval2 { proxy_cache_revalidate on; proxy_cache_valid 404 1m; proxy_pass http://${up}; }
        location /bg { proxy_cache_background_update on; proxy_cache_use_stale updating; proxy_pass http://${up}; }
        location /inactive { proxy_cache short; proxy_pass http://${up}; }
        location /sie { proxy_cache_key sie; proxy_pass http://$arg_up; }
    }
}
`;

async function get(port: number, uri: string, extra = '', method = 'GET') {
  const r = parseResponse(await rawRequest(port, `${method} ${uri} HTTP/1.0\r\nHost: localhost\r\n${extra}\r\n`));
  return { status: r.status, text: `${r.header('x-cache')} ${r.body.toString()}`, header: (n: string) => r.header(n) };
}

for (const [name, start, skip] of [['gatehouse', startGatehouse, false], ['nginx', startNginx, nginxSkip]] as const) {
  test(`proxy_cache lock, revalidate, vary, head, ranges (${name})`, { skip }, async (t) => {
    const up = await upstream();
    t.after(() => up.close());
    const srv = await start({ conf: conf(up.address) });
    t.after(() => srv.stop());
    const port = srv.port(8080);

    // lock: five parallel requests, one upstream request
    const before = up.requests.length;
    const all = await Promise.all([1, 2, 3, 4, 5].map(() => get(port, '/slow')));
    assert.equal(up.requests.length, before + 1);
    assert.deepEqual(new Set(all.map((r) => r.text.split(' ').slice(1).join(' '))).size, 1);

    // revalidate: the second fetch after expiry is conditional and answered 304
    const first = await get(port, '/reval');
    assert.match(first.text, /^MISS GET \d+ ims=-$/);
    // a 304 saying nothing of its validity: the stored response's max-age=1 counts again from now
    // (no proxy_cache_valid for 200 here)
    const first2 = await get(port, '/reval2');
    await sleep(2100);
    const again = await get(port, '/reval');
    assert.equal(again.text, first.text.replace('MISS', 'REVALIDATED'));
    assert.equal((await get(port, '/reval')).text, first.text.replace('MISS', 'HIT'));
    assert.equal((await get(port, '/reval2')).text, first2.text.replace('MISS', 'REVALIDATED'));
    assert.equal((await get(port, '/reval2')).text, first2.text.replace('MISS', 'HIT'));

    // a client's conditional fields do not reach the upstream
    const c = await get(port, '/cond', `If-Modified-Since: ${LM}\r\nRange: bytes=0-1\r\n`);
    assert.match(c.text, /ims=-$/);
    // the MISS is sent whole (nginx 1.22 applies no range to it)
    assert.equal(c.status, 200);

    // variants side by side
    const en = await get(port, '/vary', 'Accept-Language: en\r\n');
    const fr = await get(port, '/vary', 'Accept-Language: fr\r\n');
    assert.match(en.text, /^MISS/);
    assert.match(fr.text, /^MISS/);
    assert.equal((await get(port, '/vary', 'Accept-Language: en\r\n')).text, en.text.replace('MISS', 'HIT'));
    assert.equal((await get(port, '/vary', 'Accept-Language: fr\r\n')).text, fr.text.replace('MISS', 'HIT'));

    // HEAD goes upstream as GET and fills the cache for GET
    const h = await get(port, '/head', '', 'HEAD');
    assert.equal(h.text, 'MISS ');
    assert.match((await get(port, '/head')).text, /^HIT GET \d+/);

    // background update: the expired response at once, the new one stored behind it
    const b1 = await get(port, '/bg');
    await sleep(2100);
    const b2 = await get(port, '/bg');
    assert.equal(b2.text, b1.text.replace('MISS', 'STALE'));
    const b3 = await get(port, '/bg');
    assert.match(b3.text, /^HIT GET \d+/);
    assert.notEqual(b3.text.slice(4), b1.text.slice(5));

    // inactive=1s: an entry not used for a second is gone, valid or not (nginx's cache manager
    // sleeps up to 10 s when it started with an empty cache, so it is gone by 11 s; here at once)
    const i1 = await get(port, '/inactive');
    assert.match(i1.text, /^MISS/);
    assert.equal((await get(port, '/inactive')).text, i1.text.replace('MISS', 'HIT'));
    await sleep(11_500);
    assert.match((await get(port, '/inactive')).text, /^MISS/);

    // Cache-Control: stale-if-error: the expired response answers for a dead upstream, without proxy_cache_use_stale
    const dead = await RawUpstream.start((req, socket) => {
      socket.end(response('sie', '200 OK', ['Cache-Control: max-age=1, stale-if-error=60']), 'latin1');
    });
    assert.equal((await get(port, `/sie?up=${dead.address}`)).text, 'MISS sie');
    await dead.close();
    await sleep(2100);
    assert.equal((await get(port, `/sie?up=${dead.address}`)).text, 'STALE sie');

    // a byte range of a cached response that came with Accept-Ranges
    const full = await get(port, '/range');
    const part = await get(port, '/range', 'Range: bytes=0-2\r\n');
    assert.equal(part.status, 206);
    assert.equal(part.text, `HIT ${full.text.split(' ').slice(1).join(' ').slice(0, 3)}`);
  });
}

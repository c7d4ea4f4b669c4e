/**
 * memcached_pass against a real memcached (started on a free loopback port
 * by the test, stopped after it), Gatehouse and Debian's nginx 1.22 on the
 * same configuration: values found and not found, HEAD and other methods,
 * keys with spaces, memcached_gzip_flag with gunzip, an unset key, a dead
 * server with memcached_next_upstream, and a kept-alive connection reused
 * (memcached's own connection count says so). A fake memcached that answers
 * with a broken trailer checks nginx's error line.
 */
import { test } from 'node:test';
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import zlib from 'node:zlib';
import { freePort } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { ask, comparable, startPair } from './static-kit.ts';
import { logged } from './limit-kit.ts';

const MEMCACHED = '/usr/bin/memcached';

/** One memcached command and its one-line answer (or the whole answer up to END for get and stats). */
function command(port: number, text: string | Buffer, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    s.on('data', (b) => {
      got += b.toString('latin1');
      if (until.test(got)) { s.end(); resolve(got); }
    });
    s.on('error', reject);
    s.write(text);
  });
}

/** Starts memcached on a free loopback port; resolves once it answers. */
async function startMemcached(t: TestContext): Promise<number> {
  const port = await freePort();
  const child = spawn(MEMCACHED, ['-u', 'nobody', '-l', '127.0.0.1', '-p', String(port), '-U', '0', '-t', '1'], { stdio: 'ignore' });
  t.after(() => { child.kill('SIGTERM'); });
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`memcached exited with ${child.exitCode}`);
    const up = await command(port, 'version\r\n', /\r\n/).then(() => true, () => false);
    if (up) return port;
    if (Date.now() > deadline) throw new Error('memcached did not listen');
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function set(port: number, key: string, value: Buffer | string, flags = 0): Promise<void> {
  const data = typeof value === 'string' ? Buffer.from(value, 'latin1') : value;
  const reply = await command(port, Buffer.concat([Buffer.from(`set ${key} ${flags} 0 ${data.length}\r\n`), data, Buffer.from('\r\n')]), /\r\n/);
  assert.equal(reply, 'STORED\r\n');
}

async function totalConnections(port: number): Promise<number> {
  const stats = await command(port, 'stats\r\n', /END\r\n/);
  return Number(/STAT total_connections (\d+)/.exec(stats)![1]);
}

const conf = (mc: number, dead: number) => `
events {}
http {
    server_tokens off;
    access_log off;
    types { text/html html; application/json json; }
    default_type text/plain;
    upstream kept { server 127.0.0.1:${mc}; keepalive 2; }
    upstream failover { server 127.0.0.1:${dead}; server 127.0.0.1:${mc}; }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / { set $memcached_key $uri; memcached_pass kept; }
        location /zipped/ { set $memcached_key $uri; memcached_gzip_flag 2; memcached_pass kept; }
        location /unzip/ { set $memcached_key /zipped/page.html; memcached_gzip_flag 2; gunzip on; memcached_pass kept; }
        location /nokey { memcached_pass kept; }
        location /paged/ { set $memcached_key $uri; error_page 404 = /fallback; memcached_pass kept; }
        location = /fallback { return 200 "fallback for $uri\\n"; }
        location /next/ { set $memcached_key /page.html; memcached_next_upstream error; memcached_pass failover; }
    }
}
`;

test('memcached_pass answers as nginx does, found or not, gzip-flagged or not', async (t) => {
  const mc = await startMemcached(t);
  const dead = await freePort();
  await set(mc, '/page.html', '<p>cached page</p>');
  await set(mc, '/data.json', '{"a":1}');
  await set(mc, '/with%20space', 'spaced key');
  await set(mc, '/zipped/page.html', zlib.gzipSync('compressed page'), 2);
  await set(mc, '/zipped/flag1', 'flag one', 1);
  const pair = await startPair(t, { conf: conf(mc, dead) });
  const get = (uri: string, method = 'GET', extra = '') => `${method} ${uri} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${extra}\r\n`;
  const cases: Array<[string, number, string | undefined]> = [
    [get('/page.html'), 200, '<p>cached page</p>'],
    [get('/data.json'), 200, '{"a":1}'],
    [get('/with%20space'), 200, 'spaced key'],
    [get('/missing'), 404, undefined],
    [get('/page.html', 'HEAD'), 200, ''],
    [get('/page.html', 'POST', 'Content-Length: 3\r\n') + 'abc', 405, undefined],
    [get('/zipped/flag1'), 200, 'flag one'],
    [get('/paged/none'), 200, 'fallback for /fallback\n'],
    [get('/nokey'), 500, undefined],
    [get('/next/'), 200, '<p>cached page</p>'],
  ];
  for (const [request, status, body] of cases) {
    const line = request.split('\r\n')[0];
    const mine = await ask(pair.gh, request);
    assert.equal(mine.status, status, line);
    if (body !== undefined) assert.equal(mine.body.toString('latin1'), body, line);
    if (pair.ng) assert.deepEqual(comparable(mine), comparable(await ask(pair.ng, request)), `same answer as nginx for ${line}`);
  }
  const zipped = await ask(pair.gh, get('/zipped/page.html'));
  assert.equal(zipped.header('content-encoding'), 'gzip');
  assert.equal(zlib.gunzipSync(zipped.body).toString(), 'compressed page');
  const unzipped = await ask(pair.gh, get('/unzip/x'));
  assert.equal(unzipped.body.toString(), 'compressed page');
  assert.equal(unzipped.header('content-encoding'), undefined);
  if (pair.ng) {
    for (const uri of ['/zipped/page.html', '/unzip/x']) {
      assert.deepEqual(comparable(await ask(pair.gh, get(uri))), comparable(await ask(pair.ng, get(uri))), uri);
    }
    const why = /\[(error|info)\].*(memcached|connect\(\) failed)/;
    const mask = (srv: RunningServer) => logged(srv, why).map((l) => l.replace(/, client: .*$/, '').replace(/\(\d+: [^)]*\) /, ''));
    assert.deepEqual(mask(pair.gh), mask(pair.ng), 'the same error log lines');
  }
});

test('a kept-alive memcached connection serves the next requests, a 404 included', async (t) => {
  const mc = await startMemcached(t);
  await set(mc, '/page.html', 'kept');
  const pair = await startPair(t, { conf: conf(mc, await freePort()) });
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const before = await totalConnections(mc);
    for (const uri of ['/page.html', '/missing', '/page.html', '/page.html']) {
      const r = await ask(srv, `GET ${uri} HTTP/1.0\r\nHost: localhost\r\n\r\n`);
      assert.equal(r.status, uri === '/missing' ? 404 : 200, `${srv.flavor} ${uri}`);
    }
    assert.equal(await totalConnections(mc), before + 1 + 1, `${srv.flavor}: one connection for four requests (and one for stats)`);
  }
});

test('a value without its END trailer: the value goes out, nginx error line logged', async (t) => {
  const fake = net.createServer((s) => {
    s.once('data', () => s.end('VALUE /x 0 5\r\nhello\r\nEXTRA\r\n'));
  });
  await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
  t.after(() => fake.close());
  const port = (fake.address() as net.AddressInfo).port;
  const pair = await startPair(t, { conf: conf(port, await freePort()) });
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const r = await ask(srv, 'GET /x HTTP/1.0\r\nHost: localhost\r\n\r\n');
    assert.equal(r.status, 200, srv.flavor);
    assert.equal(r.body.toString(), 'hello', srv.flavor);
    assert.equal(logged(srv, /memcached sent invalid trailer/).length, 1, srv.flavor);
  }
});

/**
 * Upstream objects on the data plane against loopback origins: weighted
 * round robin as lua-resty-balancer's (t/node/upstream.t, rr-balance.t),
 * chash (t/node/chash-balance.t, chash-hashon.t), node priorities
 * (t/node/priority-balancer), retries and the answers when every node
 * fails (502) or is too slow (504) (t/node/upstream-retries.t,
 * timeout-upstream.t), pass_host (t/node/upstream-node-host... ) and https
 * origins.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePorts } from '../kit/server.ts';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startHoldingOrigin, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let a: Origin;
let b: Origin;
let slow: Origin;
let dead: string;

before(async () => {
  [gw, a, b, slow] = await Promise.all([startGateway(), startOrigin(), startOrigin(), startOrigin((req, res) => {
    // answers after the read timeout the tests give it
    setTimeout(() => res.end('late'), 1500);
    return true;
  })]);
  const [port] = await freePorts(1);
  dead = `127.0.0.1:${port}`;
});
after(async () => { await Promise.all([gw.stop(), a.close(), b.close(), slow.close()]); });

async function ports(uri: string, n: number, headers?: Record<string, string>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await proxy(gw, uri, { headers })).echo?.port ?? 0);
  return out;
}

const count = (list: number[], p: number) => list.filter((x) => x === p).length;

describe('balancing', () => {
  it('roundrobin with weights 3:1 sends 3 of every 4 requests to the heavier node', async () => {
    await put(gw, 'routes/rr', { uri: '/rr', upstream: { type: 'roundrobin', nodes: { [a.node]: 3, [b.node]: 1 } } });
    await untilRouted(gw, '/rr', (r) => r.status === 200);
    const got = await ports('/rr', 12);
    assert.equal(count(got, a.port), 9, got.join());
    assert.equal(count(got, b.port), 3, got.join());
  });

  it('roundrobin 1:1 alternates; a weight-0 node gets nothing (array form)', async () => {
    await put(gw, 'routes/rr2', { uri: '/rr2', upstream: { type: 'roundrobin', nodes: [{ host: '127.0.0.1', port: a.port, weight: 1 }, { host: '127.0.0.1', port: b.port, weight: 1 }] } });
    await untilRouted(gw, '/rr2', (r) => r.status === 200);
    const got = await ports('/rr2', 6);
    for (let i = 1; i < got.length; i++) assert.notEqual(got[i], got[i - 1], got.join());
    await put(gw, 'routes/rr0', { uri: '/rr0', upstream: { type: 'roundrobin', nodes: { [a.node]: 1, [b.node]: 0 } } });
    await untilRouted(gw, '/rr0', (r) => r.status === 200);
    assert.deepEqual(await ports('/rr0', 4), [a.port, a.port, a.port, a.port]);
  });

  it('chash on a header: one key always goes to one node, keys spread over both', async () => {
    await put(gw, 'routes/ch', { uri: '/ch', upstream: { type: 'chash', hash_on: 'header', key: 'x-user', nodes: { [a.node]: 1, [b.node]: 1 } } });
    await untilRouted(gw, '/ch', (r) => r.status === 200, { headers: { 'x-user': 'u0' } });
    const seen = new Set<number>();
    // the ring depends on the nodes' names, and so on the origins' random ports: 16 keys once
    // all landed on one node; 64 make a spread over both all but certain
    for (let k = 0; k < 64; k++) {
      const got = await ports('/ch', 3, { 'x-user': `u${k}` });
      assert.equal(new Set(got).size, 1, got.join());
      seen.add(got[0]);
    }
    assert.equal(seen.size, 2);
  });

  it('chash on a variable (arg_id)', async () => {
    await put(gw, 'routes/chv', { uri: '/chv', upstream: { type: 'chash', hash_on: 'vars', key: 'arg_id', nodes: { [a.node]: 1, [b.node]: 1 } } });
    await untilRouted(gw, '/chv?id=1', (r) => r.status === 200);
    for (const id of ['1', '2', '3', 'abc']) assert.equal(new Set(await ports(`/chv?id=${id}`, 3)).size, 1);
  });

  it('chash on vars_combinations: the key built from several variables', async () => {
    await put(gw, 'routes/chc', { uri: '/chc', upstream: { type: 'chash', hash_on: 'vars_combinations', key: '$arg_a-$http_x_b', nodes: { [a.node]: 1, [b.node]: 1 } } });
    await untilRouted(gw, '/chc?a=1', (r) => r.status === 200);
    const seen = new Set<number>();
    for (let k = 0; k < 12; k++) {
      const got = await ports(`/chc?a=${k}`, 3, { 'x-b': 'z' });
      assert.equal(new Set(got).size, 1);
      seen.add(got[0]);
    }
    assert.equal(seen.size, 2);
  });

  it('least_conn: while a request is in flight on one node, the next ones go to the other', async () => {
    const held = await startHoldingOrigin();
    try {
      await put(gw, 'routes/lconn', { uri: '/lconn', upstream: { type: 'least_conn', nodes: { [held.node]: 1, [a.node]: 1 } } });
      await untilRouted(gw, '/lconn', (r) => r.echo?.port === held.port);
      const pending = proxy(gw, '/lconn?hold');
      const release = await held.holding();
      assert.deepEqual(await ports('/lconn', 3), [a.port, a.port, a.port]);
      release();
      assert.equal((await pending).body, 'held');
      assert.deepEqual(await ports('/lconn', 2), [held.port, held.port]);
    } finally {
      await held.close();
    }
  });

  it('nodes of a lower priority take requests only when the higher ones fail', async () => {
    await put(gw, 'routes/prio', { uri: '/prio', upstream: { type: 'roundrobin', nodes: [
      { host: '127.0.0.1', port: a.port, weight: 1, priority: 1 }, { host: '127.0.0.1', port: b.port, weight: 1, priority: 0 }] } });
    await untilRouted(gw, '/prio', (r) => r.status === 200);
    assert.deepEqual(await ports('/prio', 3), [a.port, a.port, a.port]);
    await put(gw, 'routes/prio', { uri: '/prio', upstream: { type: 'roundrobin', nodes: [
      { host: '127.0.0.1', port: Number(dead.split(':')[1]), weight: 1, priority: 1 }, { host: '127.0.0.1', port: b.port, weight: 1, priority: 0 }] } });
    await untilRouted(gw, '/prio', (r) => r.echo?.port === b.port);
    assert.deepEqual(await ports('/prio', 3), [b.port, b.port, b.port]);
  });
});

describe('retries and failures', () => {
  it('a refused node is retried on the next one (retries default to nodes - 1)', async () => {
    await put(gw, 'routes/retry', { uri: '/retry', upstream: { type: 'roundrobin', nodes: { [dead]: 1, [a.node]: 1 } } });
    await untilRouted(gw, '/retry', (r) => r.status === 200);
    assert.deepEqual(await ports('/retry', 4), [a.port, a.port, a.port, a.port]);
  });

  it('retries 0: a refused try is the answer, 502', async () => {
    await put(gw, 'routes/noretry', { uri: '/noretry', upstream: { type: 'roundrobin', retries: 0, nodes: { [dead]: 1, [a.node]: 1 } } });
    await untilRouted(gw, '/noretry', (r) => r.status === 200);
    const statuses = new Set<number>();
    for (let i = 0; i < 4; i++) statuses.add((await proxy(gw, '/noretry')).status);
    assert.deepEqual([...statuses].sort(), [200, 502]);
  });

  it('every node refused: 502 with X-APISIX-Upstream-Status', async () => {
    await put(gw, 'routes/alldead', { uri: '/alldead', upstream: { type: 'roundrobin', nodes: { [dead]: 1 } } });
    const r = await untilRouted(gw, '/alldead', (x) => x.status === 502);
    assert.match(r.body, /<title>502 Bad Gateway<\/title>/);
    assert.equal(r.headers['x-apisix-upstream-status'], '502');
  });

  it('a node slower than timeout.read: 504; the route\'s timeout overrides the upstream\'s', async () => {
    await put(gw, 'routes/slow', { uri: '/slow', upstream: { type: 'roundrobin', nodes: { [slow.node]: 1 }, timeout: { connect: 1, send: 1, read: 0.3 } } });
    const r = await untilRouted(gw, '/slow', (x) => x.status === 504);
    assert.match(r.body, /504 Gateway Time-out/);
    await put(gw, 'routes/slow', { uri: '/slow', timeout: { connect: 1, send: 1, read: 5 }, upstream: { type: 'roundrobin', nodes: { [slow.node]: 1 }, timeout: { connect: 1, send: 1, read: 0.3 } } });
    const ok = await untilRouted(gw, '/slow', (x) => x.status === 200);
    assert.equal(ok.body, 'late');
  });
});

describe('Host, scheme, method', () => {
  it('pass_host: pass keeps the client\'s Host, node sends the node\'s, rewrite sends upstream_host', async () => {
    await put(gw, 'routes/ph', { uri: '/ph', upstream: { type: 'roundrobin', nodes: { [a.node]: 1 }, pass_host: 'node' } });
    let r = await untilRouted(gw, '/ph', (x) => x.echo?.headers.host === a.node, { headers: { host: 'client.test' } });
    await put(gw, 'routes/ph', { uri: '/ph', upstream: { type: 'roundrobin', nodes: { [a.node]: 1 }, pass_host: 'rewrite', upstream_host: 'up.test' } });
    r = await untilRouted(gw, '/ph', (x) => x.echo?.headers.host === 'up.test', { headers: { host: 'client.test' } });
    await put(gw, 'routes/ph', { uri: '/ph', upstream: { type: 'roundrobin', nodes: { [a.node]: 1 } } });
    r = await untilRouted(gw, '/ph', (x) => x.echo?.headers.host === 'client.test', { headers: { host: 'client.test' } });
    assert.equal(r.status, 200);
  });

  it('scheme https: the node is spoken to over TLS', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-dp-tls-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-days', '1',
      '-keyout', path.join(dir, 'k.pem'), '-out', path.join(dir, 'c.pem')], { stdio: 'ignore' });
    const srv = https.createServer({ key: fs.readFileSync(path.join(dir, 'k.pem')), cert: fs.readFileSync(path.join(dir, 'c.pem')) },
      (req, res) => res.end(`tls ${req.url}`));
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    try {
      const port = (srv.address() as AddressInfo).port;
      await put(gw, 'routes/tls', { uri: '/tls', upstream: { type: 'roundrobin', scheme: 'https', nodes: { [`127.0.0.1:${port}`]: 1 } } });
      const r = await untilRouted(gw, '/tls?q=1', (x) => x.status === 200);
      assert.equal(r.body, 'tls /tls?q=1');
    } finally {
      srv.closeAllConnections();
      srv.close();
    }
  });

  it('enable_websocket: an Upgrade request becomes a tunnel to the node; without it the node sees no Upgrade', async () => {
    const ws = await startOrigin();
    const tunnels: Array<{ destroy(): void }> = [];
    ws.server.on('upgrade', (req, socket) => {
      tunnels.push(socket);
      socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
      socket.on('data', (d: Buffer) => socket.write(`echo:${d.toString()}`));
    });
    try {
      await put(gw, 'routes/ws', { uri: '/ws', enable_websocket: true, upstream: { type: 'roundrobin', nodes: { [ws.node]: 1 } } });
      await untilRouted(gw, '/ws', (r) => r.echo?.port === ws.port);
      const echoed = await new Promise<string>((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port: gw.proxyPort, path: '/ws', headers: { connection: 'Upgrade', upgrade: 'websocket' }, agent: false });
        req.on('upgrade', (res, socket) => {
          assert.equal(res.statusCode, 101);
          socket.once('data', (d: Buffer) => { resolve(d.toString()); socket.destroy(); });
          socket.write('hello');
        });
        req.on('response', (res) => reject(new Error(`no upgrade: ${res.statusCode}`)));
        req.on('error', reject);
        req.end();
      });
      assert.equal(echoed, 'echo:hello');
      await put(gw, 'routes/ws', { uri: '/ws', upstream: { type: 'roundrobin', nodes: { [ws.node]: 1 } } });
      const plain = await untilRouted(gw, '/ws', (r) => r.status === 200 && r.echo?.headers.upgrade === undefined, { headers: { connection: 'Upgrade', upgrade: 'websocket' } });
      assert.equal(plain.echo!.headers.upgrade, undefined);
    } finally {
      // upgraded sockets are not the server's to close
      for (const t of tunnels) t.destroy();
      await ws.close();
    }
  });

  it('a node named by host name is connected to by its address; pass_host node sends the name', async () => {
    await put(gw, 'routes/named', { uri: '/named', upstream: { type: 'roundrobin', pass_host: 'node', nodes: { [`localhost:${a.port}`]: 1 } } });
    const r = await untilRouted(gw, '/named', (x) => x.status === 200);
    assert.equal(r.echo!.headers.host, `localhost:${a.port}`);
  });

  it('the request body and method go to the node as sent', async () => {
    await put(gw, 'routes/body', { uri: '/body', upstream: { type: 'roundrobin', nodes: { [a.node]: 1 } } });
    await untilRouted(gw, '/body', (x) => x.status === 200);
    const r = await proxy(gw, '/body', { method: 'PUT', body: 'payload', headers: { 'content-type': 'text/plain' } });
    assert.equal(r.echo!.method, 'PUT');
    assert.equal(r.echo!.body, 'payload');
  });
});

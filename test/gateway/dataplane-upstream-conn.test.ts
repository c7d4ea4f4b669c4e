/**
 * How the gateway connects to an upstream's nodes, as APISIX's
 * t/node/upstream-keepalive-pool.t and t/node/upstream-mtls.t: the
 * upstream's own `keepalive_pool` (size, idle_timeout, requests) instead of
 * the gateway's, and a client certificate (`tls.client_cert`/`client_key`,
 * or an SSL object of type client named by `tls.client_cert_id`) for https
 * nodes that ask for one.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, untilRouted } from './dataplane-kit.ts';
import { TestCa } from './tls-kit.ts';

let gw: Gateway;

before(async () => { gw = await startGateway({ workers: 1 }); });
after(async () => { await gw.stop(); });

/** An origin that answers with the client port of the connection, and tells when its connections close. */
async function connOrigin(): Promise<{ node: string; closed: Set<number>; close(): Promise<void> }> {
  const closed = new Set<number>();
  const server = http.createServer((req, res) => { res.end(String(req.socket.remotePort)); });
  server.on('connection', (s: Socket) => { const p = s.remotePort!; s.on('close', () => closed.add(p)); });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    node: `127.0.0.1:${port}`, closed,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

async function until(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(10);
  }
}

describe('keepalive_pool', () => {
  it('without one, the gateway\'s pool keeps one connection for many requests', async () => {
    const o = await connOrigin();
    try {
      await put(gw, 'routes/kp0', { uri: '/kp0', upstream: { type: 'roundrobin', nodes: { [o.node]: 1 } } });
      await untilRouted(gw, '/kp0', (r) => r.status === 200);
      const ports = new Set<string>();
      for (let i = 0; i < 6; i++) ports.add((await proxy(gw, '/kp0')).body);
      assert.equal(ports.size, 1);
    } finally {
      await o.close();
    }
  });

  it('requests: a connection serves that many requests, then is closed', async () => {
    const o = await connOrigin();
    try {
      await put(gw, 'routes/kp1', { uri: '/kp1', upstream: { type: 'roundrobin', nodes: { [o.node]: 1 }, keepalive_pool: { size: 4, idle_timeout: 60, requests: 2 } } });
      await untilRouted(gw, '/kp1', (r) => r.status === 200);
      const got: string[] = [];
      for (let i = 0; i < 7; i++) got.push((await proxy(gw, '/kp1')).body);
      const uses = new Map<string, number>();
      for (const p of got) uses.set(p, (uses.get(p) ?? 0) + 1);
      assert.ok([...uses.values()].every((n) => n <= 2), got.join());
      assert.ok(uses.size >= 3, got.join());
    } finally {
      await o.close();
    }
  });

  it('size: beyond it, the connections a node gave back are closed', async () => {
    const closed = new Set<number>();
    const held: Array<() => void> = [];
    const server = http.createServer((req, res) => {
      const port = String(req.socket.remotePort);
      if (req.url?.includes('hold')) held.push(() => res.end(port));
      else res.end(port);
    });
    server.on('connection', (sock: Socket) => { const p = sock.remotePort!; sock.on('close', () => closed.add(p)); });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const node = `127.0.0.1:${(server.address() as AddressInfo).port}`;
      await put(gw, 'routes/kp3', { uri: '/kp3', upstream: { type: 'roundrobin', nodes: { [node]: 1 }, keepalive_pool: { size: 1 } } });
      await untilRouted(gw, '/kp3', (r) => r.status === 200);
      // two requests in flight: two connections; both given back, one stays
      const pending = [proxy(gw, '/kp3?hold'), proxy(gw, '/kp3?hold')];
      await until('two requests held', () => held.length === 2);
      for (const release of held) release();
      const ports = (await Promise.all(pending)).map((r) => Number(r.body));
      assert.notEqual(ports[0], ports[1]);
      await until('one of the two closed', () => ports.some((p) => closed.has(p)));
      const kept = ports.find((p) => !closed.has(p));
      assert.equal(Number((await proxy(gw, '/kp3')).body), kept);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('idle_timeout: an idle connection is closed by the gateway after it', async () => {
    const o = await connOrigin();
    try {
      await put(gw, 'routes/kp2', { uri: '/kp2', upstream: { type: 'roundrobin', nodes: { [o.node]: 1 }, keepalive_pool: { idle_timeout: 0.2 } } });
      await untilRouted(gw, '/kp2', (r) => r.status === 200);
      const port = Number((await proxy(gw, '/kp2')).body);
      await until('the idle connection closed', () => o.closed.has(port));
    } finally {
      await o.close();
    }
  });
});

describe('tls client certificates', () => {
  const ca = new TestCa('Upstream mTLS CA');
  const server = ca.issue(['localhost']);
  const client = ca.issue(['gateway-client'], { client: true });
  let origin: https.Server;
  let node: string;

  before(async () => {
    origin = https.createServer({ key: server.key, cert: server.cert, ca: ca.cert, requestCert: true, rejectUnauthorized: true }, (req, res) => {
      const peer = (req.socket as TLSSocket).getPeerCertificate();
      res.end(`client ${peer.subject?.CN}`);
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    node = `127.0.0.1:${(origin.address() as AddressInfo).port}`;
  });
  after(() => { origin.closeAllConnections(); origin.close(); });

  it('without one the node refuses the handshake: 502', async () => {
    await put(gw, 'routes/mtls0', { uri: '/mtls0', upstream: { type: 'roundrobin', scheme: 'https', nodes: { [node]: 1 } } });
    await untilRouted(gw, '/mtls0', (r) => r.status === 502);
  });

  it('tls.client_cert and client_key are sent to the node', async () => {
    await put(gw, 'routes/mtls1', { uri: '/mtls1', upstream: { type: 'roundrobin', scheme: 'https', nodes: { [node]: 1 },
      tls: { client_cert: client.cert, client_key: client.key } } });
    const r = await untilRouted(gw, '/mtls1', (x) => x.status === 200);
    assert.equal(r.body, 'client gateway-client');
  });

  it('https health probes send the client certificate too: the node failing its probe is left out', async () => {
    const sick = https.createServer({ key: server.key, cert: server.cert, ca: ca.cert, requestCert: true, rejectUnauthorized: true }, (req, res) => {
      res.statusCode = req.url === '/status' ? 500 : 200;
      res.end('sick');
    });
    await new Promise<void>((resolve) => sick.listen(0, '127.0.0.1', resolve));
    try {
      const sickNode = `127.0.0.1:${(sick.address() as AddressInfo).port}`;
      await put(gw, 'routes/mtls3', { uri: '/mtls3', upstream: { type: 'roundrobin', scheme: 'https', nodes: { [node]: 1, [sickNode]: 1 },
        tls: { client_cert: client.cert, client_key: client.key },
        checks: { active: { type: 'https', http_path: '/status', https_verify_certificate: false,
          healthy: { interval: 1, successes: 1 }, unhealthy: { interval: 1, http_failures: 1 } } } } });
      await untilRouted(gw, '/mtls3', (x) => x.body === 'sick');
      // the healthy node's probe passes (with the certificate), the sick one's answers 500: only the healthy one is used
      const deadline = Date.now() + 10_000;
      let run = 0;
      while (run < 8) {
        run = (await proxy(gw, '/mtls3')).body === 'client gateway-client' ? run + 1 : 0;
        assert.ok(Date.now() < deadline, 'the sick node kept getting requests');
      }
    } finally {
      sick.closeAllConnections();
      sick.close();
    }
  });

  it('tls.client_cert_id names an SSL object of type client', async () => {
    await put(gw, 'ssls/upclient', { type: 'client', cert: client.cert, key: client.key });
    await put(gw, 'routes/mtls2', { uri: '/mtls2', upstream: { type: 'roundrobin', scheme: 'https', nodes: { [node]: 1 },
      tls: { client_cert_id: 'upclient' } } });
    const r = await untilRouted(gw, '/mtls2', (x) => x.status === 200);
    assert.equal(r.body, 'client gateway-client');
  });
});

/**
 * Upstream health checks on the data plane against loopback origins, as
 * APISIX's t/node/healthcheck*.t: active http and tcp probes move traffic
 * away from a node that fails them and back when it passes again; passive
 * failures, counted from proxied answers by both workers into one shared
 * state; every node unhealthy → all are still tried; the state survives a
 * route edit that keeps the checks.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { freePorts } from '../kit/server.ts';
import { defaultYaml, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';
import { GATEHOUSE_VER } from '../kit/server-name.ts';

let gw: Gateway;
let controlPort: number;

before(async () => {
  [controlPort] = await freePorts(1);
  const yaml = defaultYaml(2).replace('apisix:\n', `apisix:\n  enable_control: true\n  control:\n    ip: 127.0.0.1\n    port: ${controlPort}\n`);
  gw = await startGateway({ yaml });
});

/** GET on the control API: status and JSON. */
async function control(uri: string): Promise<{ status: number; json: unknown }> {
  const r = await fetch(`http://127.0.0.1:${controlPort}${uri}`);
  return { status: r.status, json: await r.json() };
}
after(async () => { await gw.stop(); });

/** An origin whose health path answers `health.status` (changed by the test); other requests get the echo. */
async function checkedOrigin(port = 0): Promise<Origin & { health: { status: number }; probes: () => number }> {
  const health = { status: 200 };
  let probes = 0;
  const o = await startOrigin((req, res) => {
    if (req.url !== '/status') return false;
    probes++;
    res.statusCode = health.status;
    res.end('health');
    return true;
  });
  if (port) {
    // re-listen on a given port (an origin brought back)
    await new Promise<void>((resolve) => o.server.close(() => resolve()));
    await new Promise<void>((resolve) => o.server.listen(port, '127.0.0.1', resolve));
  }
  const p = (o.server.address() as AddressInfo).port;
  return { ...o, port: p, node: `127.0.0.1:${p}`, health, probes: () => probes };
}

/** Sends requests until `ok` holds for `n` answers in a row (bounded). */
async function untilSteady(uri: string, n: number, ok: (port: number, status: number) => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  let run = 0;
  for (;;) {
    const r = await proxy(gw, uri);
    run = ok(r.echo?.port ?? 0, r.status) ? run + 1 : 0;
    if (run >= n) return;
    if (Date.now() > deadline) throw new Error(`${uri}: not steady within ${ms} ms (last ${r.status} ${r.echo?.port})`);
    await sleep(20);
  }
}

const active = (extra: Record<string, unknown> = {}) => ({
  type: 'http', http_path: '/status', timeout: 1,
  healthy: { interval: 1, successes: 1 }, unhealthy: { interval: 1, http_failures: 1, tcp_failures: 1 }, ...extra,
});

describe('active checks', () => {
  it('a node whose probe fails stops getting requests within the interval, and gets them again once it passes', async () => {
    const [a, b] = await Promise.all([checkedOrigin(), checkedOrigin()]);
    try {
      await put(gw, 'upstreams/hc1', { type: 'roundrobin', nodes: { [a.node]: 1, [b.node]: 1 }, checks: { active: active() } });
      await put(gw, 'routes/hc1', { uri: '/hc1', upstream_id: 'hc1' });
      await untilRouted(gw, '/hc1', (r) => r.echo?.port === b.port);
      // the checker runs once requests used the upstream; one worker probes for the node
      b.health.status = 500;
      await untilSteady('/hc1', 10, (p) => p === a.port);
      b.health.status = 200;
      await untilRouted(gw, '/hc1', (r) => r.echo?.port === b.port);
      // both probed, but not twice a period by two workers: at most ~2 probes per node a second
      assert.ok(a.probes() > 0);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('a node that goes down is left out (no more failed answers with retries 0); brought back, it serves again', async () => {
    const a = await checkedOrigin();
    let b = await checkedOrigin();
    const bPort = b.port;
    try {
      await put(gw, 'routes/hc2', { uri: '/hc2', upstream: { type: 'roundrobin', retries: 0, nodes: { [a.node]: 1, [b.node]: 1 },
        checks: { active: active({ type: 'tcp' }) } } });
      await untilRouted(gw, '/hc2', (r) => r.echo?.port === b.port);
      await b.close();
      // a refused connection counts (tcp_failures 1): the answers become all 200 from a
      await untilSteady('/hc2', 10, (p, status) => p === a.port && status === 200);
      // resty.healthcheck's warning for each count, the checker named by the upstream's resource key
      const log = fs.readFileSync(path.join(gw.prefix, 'logs', 'error.log'), 'utf8');
      assert.ok(log.includes(`[healthcheck] (upstream#/gateway/routes/hc2) unhealthy TCP increment (1/1) for '127.0.0.1(127.0.0.1:${bPort})'`), log.slice(-2000));
      b = await checkedOrigin(bPort);
      await untilRouted(gw, '/hc2', (r) => r.echo?.port === bPort);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('req_headers go with the probe; a probe unanswered within timeout counts as a timeout', async () => {
    const a = await checkedOrigin();
    // healthy only for probes that carry the header
    const b = await startOrigin((req, res) => {
      if (req.url !== '/status') return false;
      res.statusCode = req.headers['x-probe'] === 'yes' ? 200 : 500;
      res.end();
      return true;
    });
    // never answers its probes
    const c = await startOrigin((req) => req.url === '/status');
    try {
      await put(gw, 'routes/hc4', { uri: '/hc4', upstream: { type: 'roundrobin', nodes: { [a.node]: 1, [b.node]: 1, [c.node]: 1 },
        checks: { active: active({ timeout: 0.2, req_headers: ['X-Probe: yes'], unhealthy: { interval: 1, http_failures: 1, timeouts: 1 } }) } } });
      await untilRouted(gw, '/hc4', (r) => r.echo?.port === c.port);
      await untilSteady('/hc4', 12, (p) => p === a.port || p === b.port);
      const seen = new Set<number>();
      for (let i = 0; i < 6; i++) seen.add((await proxy(gw, '/hc4')).echo?.port ?? 0);
      assert.deepEqual([...seen].sort(), [a.port, b.port].sort());
    } finally {
      c.server.closeAllConnections();
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });

  it('every node unhealthy: all are still tried', async () => {
    const [a, b] = await Promise.all([checkedOrigin(), checkedOrigin()]);
    try {
      a.health.status = 503;
      b.health.status = 503;
      await put(gw, 'routes/hc3', { uri: '/hc3', upstream: { type: 'roundrobin', nodes: { [a.node]: 1, [b.node]: 1 }, checks: { active: active() } } });
      await untilRouted(gw, '/hc3', (r) => r.status === 200);
      // wait until both were probed unhealthy, then both still take requests
      const deadline = Date.now() + 10_000;
      while ((a.probes() < 2 || b.probes() < 2) && Date.now() < deadline) await proxy(gw, '/hc3');
      const seen = new Set<number>();
      for (let i = 0; i < 8; i++) seen.add((await proxy(gw, '/hc3')).echo?.port ?? 0);
      assert.deepEqual([...seen].sort(), [a.port, b.port].sort());
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe('the control API', () => {
  it('/v1/healthcheck shows each target\'s state and counts', async () => {
    const [a, b] = await Promise.all([checkedOrigin(), checkedOrigin()]);
    try {
      await put(gw, 'routes/hcv', { uri: '/hcv', upstream: { type: 'roundrobin', nodes: { [a.node]: 1, [b.node]: 1 },
        checks: { active: active({ unhealthy: { interval: 1, http_failures: 2 } }) } } });
      // before any request: listed, without nodes (no checker yet)
      const none = await control('/v1/healthcheck/routes/hcv');
      assert.deepEqual(none, { status: 200, json: { name: '/routes/hcv', type: 'http' } });
      b.health.status = 500;
      await untilRouted(gw, '/hcv', (r) => r.status === 200);
      const deadline = Date.now() + 10_000;
      let view: { nodes?: Array<{ port: number; status: string; counter: Record<string, number> }> } = {};
      while (Date.now() < deadline) {
        view = (await control('/v1/healthcheck/routes/hcv')).json as typeof view;
        if (view.nodes?.find((n) => n.port === b.port)?.status === 'unhealthy') break;
        await sleep(50);
      }
      const nb = view.nodes?.find((n) => n.port === b.port);
      assert.equal(nb?.status, 'unhealthy', JSON.stringify(view));
      assert.equal(view.nodes?.find((n) => n.port === a.port)?.status, 'healthy');
      const all = (await control('/v1/healthcheck')).json as Array<{ name: string }>;
      assert.ok(all.some((e) => e.name === '/routes/hcv'));
      // the counts stay at the limit once the state changed
      assert.equal(nb?.counter.http_failure, 2);
      assert.deepEqual(await control('/v1/healthcheck/routes/nope'), { status: 404, json: { error_msg: 'routes[nope] not found' } });
      assert.deepEqual(await control('/v1/healthcheck/things/1'), { status: 400, json: { error_msg: 'invalid src type things' } });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe('passive checks', () => {
  it('failures seen by both workers add up to one count; a route edit keeping the checks keeps the state', async () => {
    const a = await startOrigin();
    let failing = true;
    /** The upstream connections b's failing answers went over: each worker keeps its own (its keepalive pool). */
    const failedOver = new Set<number>();
    const b = await startOrigin((req, res) => {
      if (!failing || req.url === '/status') return false;
      failedOver.add(req.socket.remotePort!);
      res.statusCode = 500;
      res.end('bad');
      return true;
    });
    try {
      // probes only every 300 s: what changes the state here is the proxied traffic
      const checks = {
        active: { type: 'http', http_path: '/status', healthy: { interval: 300 }, unhealthy: { interval: 300 } },
        // 20 failures: over new connections the kernel spreads across the two workers, all 20 landing
        // on one worker is a 1 in 2^19 chance (with 6 it was 1 in 32, and the run below saw it once)
        passive: { healthy: { successes: 1 }, unhealthy: { http_statuses: [500], http_failures: 20 } },
      };
      const upstream = { type: 'roundrobin', nodes: { [a.node]: 1, [b.node]: 1 }, checks };
      await put(gw, 'routes/pc', { uri: '/pc', upstream });
      await untilRouted(gw, '/pc', (r) => r.status === 200);
      // new client connections spread over both workers; b turns unhealthy after 20 failures whichever worker saw them
      await untilSteady('/pc', 10, (p) => p === a.port, 30_000);
      assert.equal(b.seen.filter((s) => s.url === '/pc').length, 20);
      assert.ok(failedOver.size >= 2, `the failures came through ${failedOver.size} worker(s)`);
      // the same upstream checks on an edited route: b stays out
      await put(gw, 'routes/pc', { uri: '/pc', desc: 'edited', upstream });
      await untilRouted(gw, '/pc', () => true);
      for (let i = 0; i < 6; i++) assert.equal((await proxy(gw, '/pc')).echo?.port, a.port);
      // other checks: a new checker, b is healthy again for it
      failing = false;
      await put(gw, 'routes/pc', { uri: '/pc', upstream: { ...upstream, checks: { ...checks, passive: { unhealthy: { http_statuses: [500], http_failures: 4 } } } } });
      await untilRouted(gw, '/pc', (r) => r.echo?.port === b.port);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe('ewma', () => {
  it('sends most requests to the faster node', async () => {
    const fast = await startOrigin();
    const slow = await startOrigin((req, res) => {
      setTimeout(() => res.end(JSON.stringify({ port: (slow.server.address() as AddressInfo).port, url: req.url })), 60);
      return true;
    });
    try {
      await put(gw, 'routes/ewma', { uri: '/ewma', upstream: { type: 'ewma', nodes: { [fast.node]: 1, [slow.node]: 1 } } });
      await untilRouted(gw, '/ewma', (r) => r.status === 200);
      // once both workers measured the slow node (it starts at 0, as a node never tried), the fast one wins
      const got: number[] = [];
      for (let i = 0; i < 20; i++) got.push((await proxy(gw, '/ewma')).echo?.port ?? 0);
      assert.ok(got.filter((p) => p === fast.port).length >= 17, got.join());
    } finally {
      await Promise.all([fast.close(), slow.close()]);
    }
  });
});

describe('the upstream\'s own answers', () => {
  it('every node refused: APISIX\'s 502 page', async () => {
    const dead = await startOrigin();
    const node = dead.node;
    await dead.close();
    await put(gw, 'routes/p502', { uri: '/p502', upstream: { type: 'roundrobin', nodes: { [node]: 1 } } });
    const r = await untilRouted(gw, '/p502', (x) => x.status === 502);
    assert.equal(r.body, '<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n'
      + `<hr><center>${GATEHOUSE_VER}</center>\r\n` + '<p><em>Powered by <a href="https://apisix.apache.org/">APISIX</a>.</em></p></body>\r\n</html>\r\n');
    assert.match(String(r.headers['content-type']), /^text\/html/);
    assert.equal(r.headers['x-apisix-upstream-status'], '502');
    assert.match(String(r.headers.server), /^APISIX/);
  });

  it('two nodes refused: X-APISIX-Upstream-Status has both tries', async () => {
    const [d1, d2] = await Promise.all([startOrigin(), startOrigin()]);
    await Promise.all([d1.close(), d2.close()]);
    await put(gw, 'routes/p502b', { uri: '/p502b', upstream: { type: 'roundrobin', nodes: { [d1.node]: 1, [d2.node]: 1 } } });
    const r = await untilRouted(gw, '/p502b', (x) => x.status === 502);
    assert.equal(r.headers['x-apisix-upstream-status'], '502, 502');
  });

  it('a node slower than the read timeout: APISIX\'s 504 page', async () => {
    const slow = http.createServer((_req, res) => { setTimeout(() => res.end('late'), 2000); });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    try {
      const port = (slow.address() as AddressInfo).port;
      await put(gw, 'routes/p504', { uri: '/p504', upstream: { type: 'roundrobin', nodes: { [`127.0.0.1:${port}`]: 1 }, timeout: { connect: 1, send: 1, read: 0.2 } } });
      const r = await untilRouted(gw, '/p504', (x) => x.status === 504);
      assert.equal(r.body, '<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>504 Gateway Time-out</h1></center>\r\n'
        + `<hr><center>${GATEHOUSE_VER}</center>\r\n` + '<p><em>Powered by <a href="https://apisix.apache.org/">APISIX</a>.</em></p></body>\r\n</html>\r\n');
      assert.equal(r.headers['x-apisix-upstream-status'], '504');
    } finally {
      slow.closeAllConnections();
      slow.close();
    }
  });
});

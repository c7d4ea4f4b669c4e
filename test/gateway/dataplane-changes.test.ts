/**
 * Changes at run time with two workers: a route changed through the Admin
 * API is routed the new way by every worker shortly after the write (the
 * figure is printed), with no reload; a request in flight finishes on the
 * version it started with; many changes while requests flow lose none.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startHoldingOrigin, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { HoldingOrigin, Origin } from './dataplane-kit.ts';

let gw: Gateway;
let a: Origin;
let b: Origin;
let slow: HoldingOrigin;

before(async () => {
  [gw, a, b, slow] = await Promise.all([startGateway({ workers: 2 }), startOrigin(), startOrigin(), startHoldingOrigin()]);
});
after(async () => { await Promise.all([gw.stop(), a.close(), b.close(), slow.close()]); });

const to = (o: Origin) => ({ type: 'roundrobin', nodes: { [o.node]: 1 } });

/** A GET over a keepalive agent (the load's connections stay open across changes). */
function get(g: Gateway, path: string, agent: http.Agent): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: g.proxyPort, path, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    }).on('error', reject);
  });
}

describe('changes at run time', () => {
  it('every worker routes a changed upstream within a fraction of a second of the write', async () => {
    await put(gw, 'routes/c', { uri: '/c', upstream: to(a) });
    await untilRouted(gw, '/c', (r) => r.echo?.port === a.port);
    const times: number[] = [];
    for (let round = 0; round < 6; round++) {
      const target = round % 2 === 0 ? b : a;
      const t0 = performance.now();
      await put(gw, 'routes/c', { uri: '/c', upstream: to(target) });
      // 10 answers in a row from the new node, on new connections (the kernel spreads them over both workers)
      let inRow = 0;
      let firstOfRow = 0;
      while (inRow < 10) {
        const r = await proxy(gw, '/c');
        if (r.echo?.port === target.port) {
          if (inRow++ === 0) firstOfRow = performance.now();
        } else inRow = 0;
        assert.ok(performance.now() - t0 < 10_000, 'the change never reached every worker');
      }
      times.push(firstOfRow - t0);
    }
    times.sort((x, y) => x - y);
    console.log(`# write → routed by every worker: median ${times[times.length >> 1].toFixed(1)} ms, max ${times[times.length - 1].toFixed(1)} ms`);
    assert.ok(times[times.length - 1] < 1000, times.join());
  });

  it('a request in flight finishes on the upstream it started with', async () => {
    await put(gw, 'routes/inflight', { uri: '/inflight', upstream: to(slow) });
    await untilRouted(gw, '/inflight', (r) => r.echo?.port === slow.port);
    const n = slow.seen.length;
    const pending = proxy(gw, '/inflight?hold');
    const release = await slow.holding();
    await put(gw, 'routes/inflight', { uri: '/inflight', upstream: to(a) });
    await untilRouted(gw, '/inflight', (r) => r.echo?.port === a.port);
    assert.equal(slow.seen.length, n + 1);
    release();
    const r = await pending;
    assert.equal(r.status, 200);
    assert.equal(r.body, 'held');
  });

  it('routes changed 50 times while requests flow: no request fails', async () => {
    await put(gw, 'routes/flow', { uri: '/flow', upstream: to(a) });
    await untilRouted(gw, '/flow', (r) => r.status === 200);
    let writing = true;
    const writer = (async () => {
      for (let i = 0; i < 50; i++) await put(gw, 'routes/flow', { uri: '/flow', upstream: to(i % 2 ? a : b), desc: `v${i}` });
      writing = false;
    })();
    const statuses = new Map<number, number>();
    const client = async () => {
      while (writing) {
        const r = await proxy(gw, '/flow');
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      }
    };
    await Promise.all([writer, client(), client(), client()]);
    assert.deepEqual([...statuses.keys()], [200], JSON.stringify([...statuses]));
  });

  it('routes changed 100 times a second while a load runs: no request fails, each is answered whole by one version', async () => {
    // each version names itself on the answer and goes to its own origin (odd: b, even: a): a mix of two would show
    const version = (i: number) => ({
      uri: '/churn', upstream: to(i % 2 ? b : a),
      plugins: { 'response-rewrite': { headers: { set: { 'X-Version': String(i) } } } },
    });
    await put(gw, 'routes/churn', version(0));
    await untilRouted(gw, '/churn', (r) => r.headers['x-version'] === '0');
    const CHANGES = 200;
    let started = 0;
    let writing = true;
    const t0 = performance.now();
    const writer = (async () => {
      // paced at 100 a second; a slow write does not hold the next back (up to 4 in flight)
      const inFlight = new Set<Promise<void>>();
      for (let i = 1; i <= CHANGES; i++) {
        const due = t0 + i * 10;
        if (performance.now() < due) await sleep(due - performance.now());
        while (inFlight.size >= 4) await Promise.race(inFlight);
        started = i;
        const w: Promise<void> = put(gw, 'routes/churn', version(i)).finally(() => inFlight.delete(w));
        inFlight.add(w);
      }
      await Promise.all(inFlight);
      writing = false;
    })();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const failures: string[] = [];
    let answered = 0;
    const seen = new Set<number>();
    const client = async () => {
      while (writing) {
        const newest = started;
        const r = await get(gw, '/churn', agent).catch((e: Error) => ({ status: 0, headers: {} as http.IncomingHttpHeaders, body: e.message }));
        const v = Number(r.headers['x-version']);
        const port = (JSON.parse(r.status === 200 ? r.body : '{}') as { port?: number }).port;
        if (r.status !== 200) failures.push(`${r.status} ${r.body}`);
        else if (!(v >= 0 && v <= Math.max(newest, started)) || port !== (v % 2 ? b.port : a.port)) failures.push(`version ${v} from port ${port}`);
        else seen.add(v);
        answered++;
      }
    };
    await Promise.all([writer, ...Array.from({ length: 8 }, client)]);
    agent.destroy();
    const seconds = (performance.now() - t0) / 1000;
    console.log(`# ${CHANGES} changes in ${seconds.toFixed(2)} s (${(CHANGES / seconds).toFixed(0)}/s), ${answered} requests answered, ${seen.size} versions seen`);
    assert.deepEqual(failures, []);
    assert.ok(seen.size > 10, `only ${seen.size} versions answered`);
  });

  it('limit-count is counted once for all workers: 5 of 12 requests pass, whichever worker takes them', async () => {
    await put(gw, 'routes/lim', { uri: '/lim', plugins: { 'limit-count': { count: 5, time_window: 60, key_type: 'constant', key: 'all' } }, upstream: to(a) });
    await put(gw, 'routes/lim-marker', { uri: '/lim-marker', upstream: to(b) });
    // both writes reached every worker once 10 answers in a row come from the marker route
    let inRow = 0;
    while (inRow < 10) inRow = (await proxy(gw, '/lim-marker')).echo?.port === b.port ? inRow + 1 : 0;
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push((await proxy(gw, '/lim')).status);
    assert.equal(statuses.filter((x) => x === 200).length, 5, statuses.join());
    assert.equal(statuses.filter((x) => x === 503).length, 7, statuses.join());
  });
});

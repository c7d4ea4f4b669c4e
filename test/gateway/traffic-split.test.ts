/**
 * traffic-split against three loopback origins: weighted splits between an
 * inline upstream, an upstream object and the route's own upstream, rules
 * chosen by `vars`, the route's upstream when no rule holds, and APISIX's
 * answers for a missing upstream_id and a bad expression (the cases of
 * APISIX's t/plugin/traffic-split*.t, in our own words).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let a: Origin;
let b: Origin;
let c: Origin;

before(async () => {
  [gw, a, b, c] = await Promise.all([startGateway(), startOrigin(), startOrigin(), startOrigin()]);
  await put(gw, 'upstreams/up-c', { type: 'roundrobin', nodes: { [c.node]: 1 } });
});
after(async () => { await Promise.all([gw.stop(), a.close(), b.close(), c.close()]); });

const to = (o: Origin) => ({ type: 'roundrobin', nodes: { [o.node]: 1 } });

/** Which origin answered each of `n` requests, counted by port. */
async function split(path: string, n: number, headers?: Record<string, string>): Promise<Map<number, number>> {
  const counts = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    const r = await proxy(gw, path, { headers });
    assert.equal(r.status, 200, r.body);
    counts.set(r.echo!.port, (counts.get(r.echo!.port) ?? 0) + 1);
  }
  return counts;
}

describe('traffic-split', () => {
  it('weights 2 (inline upstream) : 1 (upstream_id) : 1 (the route\'s own) split every 4 requests exactly', async () => {
    await put(gw, 'routes/w', { uri: '/w', upstream: to(a), plugins: { 'traffic-split': { rules: [{ weighted_upstreams: [
      { upstream: { name: 'b', type: 'roundrobin', nodes: { [b.node]: 1 } }, weight: 2 },
      { upstream_id: 'up-c', weight: 1 },
      { weight: 1 },
    ] }] } } });
    await untilRouted(gw, '/w', (r) => r.echo?.port === b.port || r.echo?.port === c.port);
    const counts = await split('/w', 12);
    assert.equal(counts.get(b.port), 6);
    assert.equal(counts.get(c.port), 3);
    assert.equal(counts.get(a.port), 3);
  });

  it('the first rule whose match holds decides; no rule holds: the route\'s upstream', async () => {
    await put(gw, 'routes/m', { uri: '/m', upstream: to(a), plugins: { 'traffic-split': { rules: [
      { match: [{ vars: [['arg_name', '==', 'jack'], ['http_user-id', '>', '23']] }], weighted_upstreams: [{ upstream: to(b) }] },
      { match: [{ vars: [['http_x-api', '==', 'v1'] ] }, { vars: [['arg_v', '==', '1']] }], weighted_upstreams: [{ upstream_id: 'up-c' }] },
    ] } } });
    await untilRouted(gw, '/m?name=jack', (r) => r.echo?.port === b.port, { headers: { 'user-id': '30' } });
    assert.equal((await proxy(gw, '/m?name=jack', { headers: { 'user-id': '20' } })).echo!.port, a.port);
    assert.equal((await proxy(gw, '/m', { headers: { 'x-api': 'v1' } })).echo!.port, c.port);
    assert.equal((await proxy(gw, '/m?v=1')).echo!.port, c.port);
    assert.equal((await proxy(gw, '/m?v=2')).echo!.port, a.port);
  });

  it('weight 0 leaves an upstream out; the URI and query go on as sent', async () => {
    await put(gw, 'routes/z', { uri: '/z', upstream: to(a), plugins: { 'traffic-split': { rules: [{ weighted_upstreams: [
      { upstream: to(b), weight: 0 }, { upstream: to(c), weight: 1 },
    ] }] } } });
    const r = await untilRouted(gw, '/z?q=1', (x) => x.echo?.port === c.port);
    assert.equal(r.echo!.url, '/z?q=1');
    const counts = await split('/z', 5);
    assert.deepEqual([...counts], [[c.port, 5]]);
  });

  it('an upstream_id that does not exist: 500 with APISIX\'s message', async () => {
    await put(gw, 'routes/gone', { uri: '/gone', upstream: to(a), plugins: { 'traffic-split': { rules: [{ weighted_upstreams: [{ upstream_id: 'nope', weight: 1 }] }] } } });
    const r = await untilRouted(gw, '/gone', (x) => x.status === 500);
    assert.equal(r.body, 'failed to fetch upstream info by upstream id: nope');
  });

  it('the Admin API refuses a bad vars expression and an inline upstream that fails the schema', async () => {
    const bad = await gw.admin('PUT', '/gateway/admin/routes/bad', { uri: '/bad', upstream: to(a), plugins: { 'traffic-split': { rules: [
      { match: [{ vars: [['arg_name', '=', 'jack']] }], weighted_upstreams: [{ weight: 1 }] },
    ] } } });
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.json, { error_msg: "failed to check the configuration of plugin traffic-split err: failed to validate the 'vars' expression: invalid operator '='" });
    const worse = await gw.admin('PUT', '/gateway/admin/routes/bad', { uri: '/bad', upstream: to(a), plugins: { 'traffic-split': { rules: [
      { weighted_upstreams: [{ upstream: { type: 'roundrobin' }, weight: 1 }] },
    ] } } });
    assert.equal(worse.status, 400);
    assert.match((worse.json as { error_msg: string }).error_msg, /^failed to check the configuration of plugin traffic-split err: property "rules" validation failed/);
  });

  it('an inline upstream\'s pass_host rewrite sends its upstream_host', async () => {
    await put(gw, 'routes/h', { uri: '/h', upstream: to(a), plugins: { 'traffic-split': { rules: [{ weighted_upstreams: [
      { upstream: { type: 'roundrobin', nodes: { [b.node]: 1 }, pass_host: 'rewrite', upstream_host: 'split.example' }, weight: 1 },
    ] }] } } });
    const r = await untilRouted(gw, '/h', (x) => x.echo?.port === b.port);
    assert.equal(r.echo!.headers.host, 'split.example');
  });
});

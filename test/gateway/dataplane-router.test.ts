/**
 * The gateway's router against the real `gatehouse gateway` with loopback
 * origins: what APISIX's radixtree_host_uri router answers (t/router/
 * radixtree-uri-sanity.t, radixtree-host-uri*.t, radixtree-uri-priority.t,
 * radixtree-uri-multiple.t, radixtree-uri-vars.t, t/node/remote-addr*.t),
 * restated in our own cases. Each change goes through the Admin API and is
 * waited for on the proxy port.
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
const NOT_FOUND = '{"error_msg":"404 Route Not Found"}\n';

before(async () => {
  [gw, a, b] = await Promise.all([startGateway(), startOrigin(), startOrigin()]);
});
after(async () => { await Promise.all([gw.stop(), a.close(), b.close()]); });

const to = (o: Origin) => ({ type: 'roundrobin', nodes: { [o.node]: 1 } });
const at = (o: Origin) => (r: { echo?: { port: number } }) => r.echo?.port === o.port;

describe('router: paths', () => {
  it('answers 404 {"error_msg":"404 Route Not Found"} when no route matches', async () => {
    const r = await proxy(gw, '/nothing');
    assert.equal(r.status, 404);
    assert.equal(r.body, NOT_FOUND);
    assert.match(String(r.headers.server), /^APISIX\//);
  });

  it('an exact path is proxied with its arguments; the trailing slash is another path', async () => {
    await put(gw, 'routes/exact', { uri: '/hello', upstream: to(a) });
    const r = await untilRouted(gw, '/hello?x=1&y=2', at(a));
    assert.equal(r.status, 200);
    assert.equal(r.echo!.url, '/hello?x=1&y=2');
    assert.equal(r.echo!.headers.host, `127.0.0.1:${gw.proxyPort}`);
    assert.equal(r.echo!.headers['x-real-ip'], '127.0.0.1');
    assert.equal(r.echo!.headers['x-forwarded-for'], '127.0.0.1');
    assert.equal((await proxy(gw, '/hello/')).body, NOT_FOUND);
    assert.equal((await proxy(gw, '/hell')).body, NOT_FOUND);
  });

  it('`/foo/*` matches below /foo/ but not /foo; `/foo*` matches /foo and /foobar', async () => {
    await put(gw, 'routes/pfx', { uri: '/foo/*', upstream: to(a) });
    await put(gw, 'routes/pfx2', { uri: '/bar*', upstream: to(b) });
    await untilRouted(gw, '/foo/x/y', at(a));
    assert.equal((await proxy(gw, '/foo/')).echo?.port, a.port);
    assert.equal((await proxy(gw, '/foo')).body, NOT_FOUND);
    await untilRouted(gw, '/bar', at(b));
    assert.equal((await proxy(gw, '/barbaz/1')).echo?.port, b.port);
  });

  it('a longer prefix wins whatever the priority; on one path the higher priority wins', async () => {
    await put(gw, 'routes/long', { uri: '/p/q/*', priority: 0, upstream: to(a) });
    await put(gw, 'routes/short', { uri: '/p/*', priority: 100, upstream: to(b) });
    await untilRouted(gw, '/p/x', at(b));
    assert.equal((await proxy(gw, '/p/q/r')).echo?.port, a.port);
    await put(gw, 'routes/same1', { uri: '/same', priority: 1, upstream: to(a) });
    await put(gw, 'routes/same2', { uri: '/same', priority: 2, upstream: to(b) });
    await untilRouted(gw, '/same', at(b));
    await put(gw, 'routes/same1', { uri: '/same', priority: 3, upstream: to(a) });
    await untilRouted(gw, '/same', at(a));
  });

  it('`uris` lists several paths of one route', async () => {
    await put(gw, 'routes/uris', { uris: ['/u1', '/u2/*'], upstream: to(a) });
    await untilRouted(gw, '/u1', at(a));
    assert.equal((await proxy(gw, '/u2/z')).echo?.port, a.port);
  });
});

describe('router: conditions', () => {
  it('methods: a route for POST does not take GET', async () => {
    await put(gw, 'routes/post', { uri: '/m', methods: ['POST', 'PUT'], upstream: to(a) });
    await untilRouted(gw, '/m', at(a), { method: 'POST' });
    assert.equal((await proxy(gw, '/m')).body, NOT_FOUND);
  });

  it('hosts: a route of the host beats a host-less one of higher priority; `*.w.test` matches any depth below, not w.test', async () => {
    await put(gw, 'routes/h-any', { uri: '/h', priority: 10, upstream: to(a) });
    await put(gw, 'routes/h-host', { uri: '/h', host: 'h.test', upstream: to(b) });
    await put(gw, 'routes/h-wild', { uri: '/w', hosts: ['*.w.test'], upstream: to(b) });
    await untilRouted(gw, '/h', at(b), { headers: { host: 'H.test' } });
    assert.equal((await proxy(gw, '/h', { headers: { host: 'other.test' } })).echo?.port, a.port);
    await untilRouted(gw, '/w', at(b), { headers: { host: 'a.b.w.test' } });
    assert.equal((await proxy(gw, '/w', { headers: { host: 'w.test' } })).body, NOT_FOUND);
    // a pattern with a port compares to the Host header as sent
    await put(gw, 'routes/h-port', { uri: '/hp', host: 'p.test:8080', upstream: to(b) });
    await untilRouted(gw, '/hp', at(b), { headers: { host: 'p.test:8080' } });
    assert.equal((await proxy(gw, '/hp', { headers: { host: 'p.test' } })).body, NOT_FOUND);
  });

  it('vars: ==, ~~, ~*, in, >, and the "!" negation, ANDed', async () => {
    await put(gw, 'routes/vars', {
      uri: '/v',
      vars: [['arg_k', '==', 'v'], ['http_x_tag', '~~', '^ab'], ['arg_n', '>', 10], ['arg_c', 'in', ['red', 'blue']], ['arg_no', '!', '==', 'x'], ['http_x_ci', '~*', '^yes$']],
      upstream: to(a),
    });
    const ok = '/v?k=v&n=11&c=red';
    const h = { 'x-tag': 'abc', 'x-ci': 'YES' };
    await untilRouted(gw, ok, at(a), { headers: h });
    assert.equal((await proxy(gw, '/v?k=w&n=11&c=red', { headers: h })).body, NOT_FOUND);
    assert.equal((await proxy(gw, '/v?k=v&n=9&c=red', { headers: h })).body, NOT_FOUND);
    assert.equal((await proxy(gw, '/v?k=v&n=11&c=green', { headers: h })).body, NOT_FOUND);
    assert.equal((await proxy(gw, `${ok}&no=x`, { headers: h })).body, NOT_FOUND);
    assert.equal((await proxy(gw, ok, { headers: { ...h, 'x-tag': 'xab' } })).body, NOT_FOUND);
    assert.equal((await proxy(gw, ok, { headers: { ...h, 'x-ci': 'no' } })).body, NOT_FOUND);
  });

  it('remote_addrs: a CIDR with the client passes, one without does not', async () => {
    await put(gw, 'routes/ra1', { uri: '/ra', remote_addrs: ['10.0.0.0/8'], upstream: to(a) });
    await put(gw, 'routes/ra2', { uri: '/ra2', remote_addr: '127.0.0.0/24', upstream: to(b) });
    await untilRouted(gw, '/ra2', at(b));
    assert.equal((await proxy(gw, '/ra')).body, NOT_FOUND);
  });

  it('a route whose vars pattern cannot be compiled is left out; the others still route', async () => {
    await put(gw, 'routes/badre', { uri: '/badre', vars: [['arg_x', '~~', '(']], upstream: to(a) });
    await put(gw, 'routes/badre-marker', { uri: '/badre-marker', upstream: to(a) });
    await untilRouted(gw, '/badre-marker', at(a));
    assert.equal((await proxy(gw, '/badre?x=1')).body, NOT_FOUND);
    // a plugin's pattern is checked by the Admin API already (proxy-rewrite's check_schema compiles regex_uri)
    const bad = await gw.admin('PUT', '/gateway/admin/routes/badpl', { uri: '/badpl', plugins: { 'proxy-rewrite': { regex_uri: ['(', '/x'] } }, upstream: to(a) });
    assert.equal(bad.status, 400);
  });

  it('status 0 takes a route out; 1 puts it back', async () => {
    await put(gw, 'routes/st', { uri: '/st', status: 0, upstream: to(a) });
    await put(gw, 'routes/st-marker', { uri: '/st-marker', upstream: to(a) });
    await untilRouted(gw, '/st-marker', at(a));
    assert.equal((await proxy(gw, '/st')).body, NOT_FOUND);
    await put(gw, 'routes/st', { uri: '/st', status: 1, upstream: to(a) });
    await untilRouted(gw, '/st', at(a));
  });
});

describe('router: services and upstreams', () => {
  it('a route takes its service\'s upstream and hosts; its own upstream_id wins over the service\'s', async () => {
    await put(gw, 'upstreams/ub', to(b));
    await put(gw, 'services/s1', { hosts: ['svc.test'], upstream: to(a) });
    await put(gw, 'routes/svc', { uri: '/svc', service_id: 's1' });
    await untilRouted(gw, '/svc', at(a), { headers: { host: 'svc.test' } });
    assert.equal((await proxy(gw, '/svc', { headers: { host: 'else.test' } })).body, NOT_FOUND);
    await put(gw, 'routes/svc', { uri: '/svc', service_id: 's1', upstream_id: 'ub' });
    await untilRouted(gw, '/svc', at(b), { headers: { host: 'svc.test' } });
  });

  it('an upstream changed through the Admin API is used by the next requests, without a reload', async () => {
    await put(gw, 'upstreams/moving', to(a));
    await put(gw, 'routes/moving', { uri: '/moving', upstream_id: 'moving' });
    await untilRouted(gw, '/moving', at(a));
    const t0 = Date.now();
    await put(gw, 'upstreams/moving', to(b));
    await untilRouted(gw, '/moving', at(b));
    assert.ok(Date.now() - t0 < 2000, `took ${Date.now() - t0} ms`);
  });

  it('a route with plugins and no upstream is 503; empty nodes are 503', async () => {
    await put(gw, 'routes/noup', { uri: '/noup', plugins: {} });
    await untilRouted(gw, '/noup', (r) => r.status === 503);
    await put(gw, 'routes/empty', { uri: '/empty', upstream: { type: 'roundrobin', nodes: {} } });
    await untilRouted(gw, '/empty', (r) => r.status === 503);
  });
});

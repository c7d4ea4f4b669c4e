/**
 * More plugins on the gateway's request path against a loopback origin:
 * response-rewrite `filters` (t/plugin/response-rewrite2.t, 3.t) and
 * consumer-restriction by `consumer_group_id` (t/plugin/consumer-restriction2.t),
 * cors with plugin metadata and `timing_allow_origins` (t/plugin/cors3.t, cors4.t),
 * consumer group plugins (t/node/consumer-group.t),
 * restated in our own cases.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let o: Origin;

before(async () => {
  [gw, o] = await Promise.all([startGateway(), startOrigin((req, res) => {
    if (!req.url?.startsWith('/hello')) return false;
    res.setHeader('Content-Type', 'text/plain');
    res.setHeader('Content-Length', '12');
    res.end('hello world\n');
    return true;
  })]);
});
after(async () => { await Promise.all([gw.stop(), o.close()]); });

const up = () => ({ type: 'roundrobin', nodes: { [o.node]: 1 } });
const rr = (conf: Record<string, unknown>) => ({ uri: '/hello', plugins: { 'response-rewrite': conf }, upstream: up() });

describe('response-rewrite filters', () => {
  it('once: the first match is replaced, and the length goes', async () => {
    await put(gw, 'routes/rr', rr({ filters: [{ regex: 'l', replace: 'L' }] }));
    const r = await untilRouted(gw, '/hello', (x) => x.body !== 'hello world\n');
    assert.equal(r.status, 200);
    assert.equal(r.body, 'heLlo world\n');
    assert.equal(r.headers['content-length'], undefined);
  });

  it('global, with captures ($1, ${1}, $0) and options (i)', async () => {
    await put(gw, 'routes/rr', rr({ filters: [
      { regex: '(L)', replace: '[$1]', scope: 'global', options: 'ijo' },
      { regex: 'w(or)', replace: '${1}-$0' },
    ] }));
    const r = await untilRouted(gw, '/hello', (x) => x.body.startsWith('he['));
    assert.equal(r.body, 'he[l][l]o or-wor[l]d\n');
  });

  it('vars that do not hold leave the body alone; status_code with filters', async () => {
    await put(gw, 'routes/rr', rr({ vars: [['status', '==', 500]], filters: [{ regex: 'hello', replace: 'bye' }] }));
    await untilRouted(gw, '/hello', (x) => x.body === 'hello world\n');
    assert.equal((await proxy(gw, '/hello')).headers['content-length'], '12');
    await put(gw, 'routes/rr', rr({ status_code: 203, filters: [{ regex: 'hello', replace: 'bye' }] }));
    const r = await untilRouted(gw, '/hello', (x) => x.status === 203);
    assert.equal(r.body, 'bye world\n');
  });

  it('the Admin API refuses a regex that does not compile, and body with filters', async () => {
    const bad = await gw.admin('PUT', '/gateway/admin/routes/rr2', rr({ filters: [{ regex: '(', replace: 'x' }] }));
    assert.equal(bad.status, 400);
    assert.match((bad.json as { error_msg: string }).error_msg, /^failed to check the configuration of plugin response-rewrite err: regex "\(" validation failed: /);
    const both = await gw.admin('PUT', '/gateway/admin/routes/rr2', rr({ body: 'x', filters: [{ regex: 'a', replace: 'b' }] }));
    assert.equal(both.status, 400);
  });
});

describe('consumer-restriction by consumer_group_id', () => {
  before(async () => {
    await put(gw, 'consumer_groups/gold', { plugins: {} });
    await put(gw, 'consumer_groups/silver', { plugins: {} });
    await put(gw, 'consumers', { username: 'jack', group_id: 'gold', plugins: { 'key-auth': { key: 'k-jack' } } });
    await put(gw, 'consumers', { username: 'rose', group_id: 'silver', plugins: { 'key-auth': { key: 'k-rose' } } });
    await put(gw, 'consumers', { username: 'solo', plugins: { 'key-auth': { key: 'k-solo' } } });
  });

  it('whitelist: a member of the group passes, another group is refused, no group is 401', async () => {
    await put(gw, 'routes/cg', { uri: '/cg', upstream: up(), plugins: { 'key-auth': {}, 'consumer-restriction': { type: 'consumer_group_id', whitelist: ['gold'] } } });
    const ok = await untilRouted(gw, '/cg', (x) => x.status === 200, { headers: { apikey: 'k-jack' } });
    assert.equal(ok.echo!.headers['x-consumer-username'], 'jack');
    const no = await proxy(gw, '/cg', { headers: { apikey: 'k-rose' } });
    assert.equal(no.status, 403);
    assert.equal(no.body, '{"message":"The consumer_group_id is forbidden."}\n');
    const none = await proxy(gw, '/cg', { headers: { apikey: 'k-solo' } });
    assert.equal(none.status, 401);
    assert.equal(none.body, '{"message":"The request is rejected, please check the consumer_group_id for this request"}\n');
  });

  it('blacklist with rejected_code and rejected_msg', async () => {
    await put(gw, 'routes/cg', { uri: '/cg', upstream: up(), plugins: { 'key-auth': {}, 'consumer-restriction': { type: 'consumer_group_id', blacklist: ['silver'], rejected_code: 401, rejected_msg: 'no silver' } } });
    const no = await untilRouted(gw, '/cg', (x) => x.status === 401, { headers: { apikey: 'k-rose' } });
    assert.equal(no.body, '{"message":"no silver"}\n');
    assert.equal((await proxy(gw, '/cg', { headers: { apikey: 'k-jack' } })).status, 200);
  });
});

describe('cors with plugin metadata and timing origins', () => {
  before(async () => {
    await put(gw, 'plugin_metadata/cors', { allow_origins: { key_1: 'https://domain.com', key_2: 'https://sub.domain.com,https://sub2.domain.com', key_3: '*' } });
  });

  it('allow_origins_by_metadata: an origin of a named list is echoed; one of no named list gets nothing', async () => {
    await put(gw, 'routes/cm', { uri: '/cm', upstream: up(), plugins: { cors: { allow_origins_by_metadata: ['key_1', 'key_2'] } } });
    const r = await untilRouted(gw, '/cm', (x) => x.headers['access-control-allow-origin'] !== undefined, { headers: { Origin: 'https://sub2.domain.com' } });
    assert.equal(r.headers['access-control-allow-origin'], 'https://sub2.domain.com');
    assert.equal((await proxy(gw, '/cm', { headers: { Origin: 'https://domain.com' } })).headers['access-control-allow-origin'], 'https://domain.com');
    assert.equal((await proxy(gw, '/cm', { headers: { Origin: 'https://other.com' } })).headers['access-control-allow-origin'], undefined);
  });

  it('a metadata list of * allows every origin; the route\'s own list is tried when the metadata does not allow', async () => {
    await put(gw, 'routes/cm', { uri: '/cm', upstream: up(), plugins: { cors: { allow_origins_by_metadata: ['key_3'] } } });
    const r = await untilRouted(gw, '/cm', (x) => x.headers['access-control-allow-origin'] === 'https://any.com', { headers: { Origin: 'https://any.com' } });
    assert.equal(r.headers['access-control-allow-methods'], '*');
    await put(gw, 'routes/cm', { uri: '/cm', upstream: up(), plugins: { cors: { allow_origins_by_metadata: ['key_1'], allow_origins: 'https://own.com,https://own2.com' } } });
    const own = await untilRouted(gw, '/cm', (x) => x.headers['access-control-allow-origin'] === 'https://own2.com', { headers: { Origin: 'https://own2.com' } });
    assert.equal(own.headers.vary, 'Origin');
    assert.equal((await proxy(gw, '/cm', { headers: { Origin: 'https://domain.com' } })).headers['access-control-allow-origin'], 'https://domain.com');
  });

  it('the Admin API checks the metadata with cors\' metadata schema', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/plugin_metadata/cors', { allow_origins: { k: 'not an origin' } });
    assert.equal(r.status, 400);
  });

  it('timing_allow_origins and timing_allow_origins_by_regex give Timing-Allow-Origin to the origins they allow', async () => {
    await put(gw, 'routes/ct', { uri: '/ct', upstream: up(), plugins: { cors: { timing_allow_origins: 'http://a.test,http://b.test' } } });
    const r = await untilRouted(gw, '/ct', (x) => x.headers['timing-allow-origin'] === 'http://b.test', { headers: { Origin: 'http://b.test' } });
    assert.equal(r.headers['access-control-allow-origin'], '*');
    assert.equal((await proxy(gw, '/ct', { headers: { Origin: 'http://c.test' } })).headers['timing-allow-origin'], undefined);
    await put(gw, 'routes/ct', { uri: '/ct', upstream: up(), plugins: { cors: { timing_allow_origins_by_regex: ['.*\\.example\\.org$'] } } });
    const rx = await untilRouted(gw, '/ct', (x) => x.headers['timing-allow-origin'] === 'http://x.example.org', { headers: { Origin: 'http://x.example.org' } });
    assert.equal(rx.status, 200);
    assert.equal((await proxy(gw, '/ct', { headers: { Origin: 'http://x.example.com' } })).headers['timing-allow-origin'], undefined);
  });
});

describe('consumer group plugins', () => {
  it('after authentication the group\'s plugins merge into the route, under the consumer\'s own', async () => {
    await put(gw, 'consumer_groups/team', { plugins: {
      'proxy-rewrite': { headers: { set: { 'X-Group': 'team' } } },
      'response-rewrite': { headers: { set: { 'X-Group-Answer': 'team' } } },
    } });
    await put(gw, 'consumers', { username: 'ann', group_id: 'team', plugins: { 'key-auth': { key: 'k-ann' } } });
    await put(gw, 'consumers', { username: 'bob', group_id: 'team', plugins: {
      'key-auth': { key: 'k-bob' }, 'proxy-rewrite': { headers: { set: { 'X-Group': 'bob-own' } } },
    } });
    await put(gw, 'routes/grp', { uri: '/grp', upstream: up(), plugins: { 'key-auth': {} } });
    const ann = await untilRouted(gw, '/grp', (x) => x.echo?.headers['x-group'] === 'team', { headers: { apikey: 'k-ann' } });
    assert.equal(ann.headers['x-group-answer'], 'team');
    const bob = await proxy(gw, '/grp', { headers: { apikey: 'k-bob' } });
    assert.equal(bob.echo!.headers['x-group'], 'bob-own');
    assert.equal(bob.headers['x-group-answer'], 'team');
    const solo = await proxy(gw, '/grp', { headers: { apikey: 'k-solo' } });
    assert.equal(solo.echo!.headers['x-group'], undefined);
  });
});

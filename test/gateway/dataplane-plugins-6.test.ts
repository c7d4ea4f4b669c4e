/**
 * Where the plugin triage (scripts/apisix-plugin-triage.ts) found the
 * gateway answering otherwise than APISIX: regex_uri templates and captures
 * (proxy-rewrite, redirect), header values that resolve to nothing, the
 * limiters' counts starting again when their conf changes, APISIX's own
 * variables ($route_id, the normalized $request_uri), request-id's
 * algorithms, and the Admin
 * API's checks of regex_uri, header names and redirect's exclusive options.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { assertRefused, proxy, put, routeTo, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let o: Origin;

before(async () => { [gw, o] = await Promise.all([startGateway(), startOrigin()]); });
after(async () => { await Promise.all([gw.stop(), o.close()]); });

const route = (uri: string, plugins: Record<string, unknown>) => routeTo(o, uri, plugins);
const refused = (plugins: Record<string, unknown>, message: string) => assertRefused(gw, o, plugins, message);

describe('regex_uri templates', () => {
  it('proxy-rewrite: ${1} in the template and $1 / ${2} in header values are the captures; a header of an unset variable is not sent', async () => {
    await put(gw, 'routes/rx', route('/rx/*', { 'proxy-rewrite': {
      regex_uri: ['^/rx/(\\w+)/(\\w+)', '/to/${2}/$1'],
      headers: { set: { 'X-First': 'cap-$1', 'X-Both': '${1}+${2}', 'X-Gone': '$http_not_sent' }, add: { 'X-Added': 'got-$2' } },
    } }));
    const r = await untilRouted(gw, '/rx/aa/bb', (x) => x.echo !== undefined, { headers: { 'X-Gone': 'from client' } });
    assert.equal(r.echo!.url, '/to/bb/aa');
    assert.equal(r.echo!.headers['x-first'], 'cap-aa');
    assert.equal(r.echo!.headers['x-both'], 'aa+bb');
    assert.equal(r.echo!.headers['x-added'], 'got-bb');
    // set to '' removes it, the client's value too (ngx.req.set_header with '')
    assert.equal(r.echo!.headers['x-gone'], undefined);
  });

  it('redirect: ${1} in regex_uri\'s template is the capture', async () => {
    await put(gw, 'routes/rd', route('/rd/*', { redirect: { regex_uri: ['^/rd/(.*)', 'http://example.test/${1}/x'] } }));
    const r = await untilRouted(gw, '/rd/abc', (x) => x.status === 302);
    assert.equal(r.headers.location, 'http://example.test/abc/x');
  });

  it('redirect: \\$uri stays as written, $uri is the path; encode_uri escapes the new path (before its ?)', async () => {
    await put(gw, 'routes/rd-vars', route('/rd-vars/*', { redirect: { uri: '/kept\\$uri$uri' } }));
    await put(gw, 'routes/rd-enc', route('/rd-enc/*', { redirect: { uri: '$uri?from=$uri', encode_uri: true } }));
    const r = await untilRouted(gw, '/rd-enc/a%20b', (x) => x.status === 302);
    assert.equal(r.headers.location, '/rd-enc/a%20b?from=/rd-enc/a b');
    assert.equal((await proxy(gw, '/rd-vars/x')).headers.location, '/kept\\$uri/rd-vars/x');
  });

  it('refusals: a pattern that does not compile, a $ that names no capture, odd pairs, bad header names and values, http_to_https with append_query_string', async () => {
    const bad = await gw.admin('PUT', '/gateway/admin/routes/refused', route('/refused', { 'proxy-rewrite': { regex_uri: ['[^/x/(.*)', '/$1'] } }));
    assert.equal(bad.status, 400);
    assert.match((bad.json as { error_msg: string }).error_msg, /^failed to check the configuration of plugin proxy-rewrite err: invalid regex_uri\(\[\^\/x\/\(\.\*\), \/\$1\): /);
    await refused({ 'proxy-rewrite': { regex_uri: ['^/x/(.*)', '/$`1'] } },
      'failed to check the configuration of plugin proxy-rewrite err: invalid regex_uri(^/x/(.*), /$`1): failed to compile the replacement template');
    await refused({ 'proxy-rewrite': { regex_uri: ['^/a', '/b', '^/c'] } },
      'failed to check the configuration of plugin proxy-rewrite err: The length of regex_uri should be an even number');
    await refused({ 'proxy-rewrite': { headers: { 'X-Api Version': 'v2' } } },
      'failed to check the configuration of plugin proxy-rewrite err: invalid field character in header');
    await refused({ 'proxy-rewrite': { headers: { 'X-Api-Version': 'v2\r\n' } } },
      'failed to check the configuration of plugin proxy-rewrite err: invalid value character in header');
    await refused({ redirect: { http_to_https: true, append_query_string: true } },
      'failed to check the configuration of plugin redirect err: only one of `http_to_https` and `append_query_string` can be configured.');
  });
});

describe('limiters and conf changes', () => {
  it('limit-count counts again when its conf changes (here only its key), as APISIX keys the count by the conf\'s version', async () => {
    await put(gw, 'routes/lc', route('/lc', { 'limit-count': { count: 1, time_window: 60, key: 'remote_addr' } }));
    await untilRouted(gw, '/lc', (x) => x.status === 200);
    assert.equal((await proxy(gw, '/lc')).status, 503);
    // same count and window, another key that gives the same address: a new count
    await put(gw, 'routes/lc', route('/lc', { 'limit-count': { count: 1, time_window: 60, key: 'server_addr' } }));
    await untilRouted(gw, '/lc', (x) => x.status === 200);
    assert.equal((await proxy(gw, '/lc')).status, 503);
    // a change elsewhere in the route keeps the count
    await put(gw, 'routes/lc', { ...route('/lc', { 'limit-count': { count: 1, time_window: 60, key: 'server_addr' } }), desc: 'renamed' });
    // a route written after it: once that one is routed, the change before it is applied too
    await put(gw, 'routes/lc-marker', route('/lc-marker', {}));
    await untilRouted(gw, '/lc-marker', (x) => x.status === 200);
    assert.equal((await proxy(gw, '/lc')).status, 503);
  });

  it('a global rule\'s limiter counts for the rule over all routes, apart from a route\'s own with the same conf', async () => {
    // connections counted per X-Conn, each request its own: one's release (its log phase) cannot race the next
    const conn = { conn: 1, burst: 0, default_conn_delay: 0.1, key: 'http_x_conn' };
    await put(gw, 'routes/g1', route('/g1', { 'limit-conn': conn }));
    await put(gw, 'routes/g2', route('/g2', {}));
    // counted per X-Who: the waits below ask as someone else than the requests counted
    await put(gw, 'global_rules/limits', { plugins: { 'limit-count': { count: 2, time_window: 60, key: 'http_x_who' }, 'limit-conn': conn } });
    try {
      await untilRouted(gw, '/g1', (x) => x.status === 200 && x.headers['x-ratelimit-limit'] === '2', { headers: { 'X-Who': 'waiting', 'X-Conn': 'waiting' } });
      const me = (n: number) => ({ headers: { 'X-Who': 'me', 'X-Conn': `c${n}` } });
      // the route's limit-conn and the rule's each hold one connection: the request passes
      assert.equal((await proxy(gw, '/g1', me(1))).status, 200);
      assert.equal((await proxy(gw, '/g2', me(2))).status, 200);
      assert.equal((await proxy(gw, '/g1', me(3))).status, 503);
      assert.equal((await proxy(gw, '/g2', me(4))).status, 503);
      // both connections of the first request were given back (its log phase ran before the three after it were answered)
      assert.equal((await proxy(gw, '/g1', { headers: { 'X-Who': 'again', 'X-Conn': 'c1' } })).status, 200);
    } finally {
      await gw.admin('DELETE', '/gateway/admin/global_rules/limits');
    }
    await untilRouted(gw, '/g2', (x) => x.status === 200 && x.headers['x-ratelimit-limit'] === undefined);
  });

  it('limit-count\'s quota headers take the names of its plugin metadata', async () => {
    await put(gw, 'plugin_metadata/limit-count', { limit_header: 'Quota', remaining_header: 'Quota-Left', reset_header: 'Quota-Reset' });
    try {
      await put(gw, 'routes/lc-names', route('/lc-names', { 'limit-count': { count: 9, time_window: 60 } }));
      const r = await untilRouted(gw, '/lc-names', (x) => x.headers.quota !== undefined);
      assert.equal(r.headers.quota, '9');
      assert.match(String(r.headers['quota-left']), /^\d+$/);
      assert.equal(r.headers['x-ratelimit-limit'], undefined);
    } finally {
      await gw.admin('DELETE', '/gateway/admin/plugin_metadata/limit-count');
    }
  });

  it('limit-req counts again when its conf changes', async () => {
    await put(gw, 'routes/lr', route('/lr', { 'limit-req': { rate: 0.1, burst: 0, key: 'remote_addr', rejected_code: 429 } }));
    await untilRouted(gw, '/lr', (x) => x.status === 200);
    assert.equal((await proxy(gw, '/lr')).status, 429);
    await put(gw, 'routes/lr', route('/lr', { 'limit-req': { rate: 0.1, burst: 0, key: 'remote_addr', rejected_code: 430 } }));
    await untilRouted(gw, '/lr', (x) => x.status === 200);
    assert.equal((await proxy(gw, '/lr')).status, 430);
  });
});

describe('APISIX\'s variables', () => {
  it('$route_id and $consumer_name resolve in a plugin\'s values (mocking\'s response_headers)', async () => {
    await put(gw, 'routes/mock-vars', { uri: '/mock-vars', plugins: { mocking: { response_example: 'mocked', response_headers: { 'X-Route-Id': '$route_id', 'X-Who': '[$consumer_name]' } } } });
    const r = await untilRouted(gw, '/mock-vars', (x) => x.status === 200);
    assert.equal(r.headers['x-route-id'], 'mock-vars');
    assert.equal(r.headers['x-who'], '[]');
  });

  it('$request_uri is the normalized path with the arguments: uri-blocker is not bypassed by /./ or //', async () => {
    await put(gw, 'routes/internal', route('/internal/*', { 'uri-blocker': { block_rules: ['^/internal/'] } }));
    await untilRouted(gw, '/internal/x', (x) => x.status === 403);
    assert.equal((await proxy(gw, '/./internal/x?a=1')).status, 403);
    assert.equal((await proxy(gw, '//internal/x')).status, 403);
  });
});

describe('request-id algorithms', () => {
  const shapes: Record<string, RegExp> = {
    uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    uuidv7: /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    nanoid: /^[-_0-9a-zA-Z]{21}$/,
    ksuid: /^[0-9a-zA-Z]{27}$/,
    range_id: /^[ab]{8}$/,
  };
  for (const [algorithm, shape] of Object.entries(shapes)) {
    it(`${algorithm}: the id upstream and on the answer has its shape`, async () => {
      const conf: Record<string, unknown> = { algorithm };
      if (algorithm === 'range_id') conf.range_id = { length: 8, char_set: 'ababab' };
      await put(gw, `routes/rid-${algorithm}`, route(`/rid-${algorithm}`, { 'request-id': conf }));
      const r = await untilRouted(gw, `/rid-${algorithm}`, (x) => x.echo !== undefined);
      const id = r.headers['x-request-id'] as string;
      assert.match(id, shape);
      assert.equal(r.echo!.headers['x-request-id'], id);
    });
  }

  it('uuidv7: a later request\'s id does not sort before an earlier one\'s (the first 48 bits are the time in ms)', async () => {
    const a = (await proxy(gw, '/rid-uuidv7')).headers['x-request-id'] as string;
    const b = (await proxy(gw, '/rid-uuidv7')).headers['x-request-id'] as string;
    assert.ok(a.slice(0, 13) <= b.slice(0, 13), `${a} then ${b}`);
  });
});

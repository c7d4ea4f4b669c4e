/**
 * The Admin API's routes collection against the real `gatehouse gateway`:
 * the cases are APISIX's own (t/admin/routes.t, routes2.t, routes3.t,
 * routes4.t, routes_request_body.t, filter.t, response_body_format.t),
 * restated here with our key prefix (`/gateway/routes/1`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';

const ROUTE = { methods: ['GET'], upstream: { nodes: { '127.0.0.1:8080': 1 }, type: 'roundrobin' }, desc: 'new route', uri: '/index.html' };

let gw: Gateway;
before(async () => { gw = await startGateway(); });
after(async () => { await gw.stop(); });

describe('routes: create, read, replace, delete', () => {
  it('PUT a new id answers 201 with the stored value: the body as sent plus id and times (response_body_format.t)', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/1', ROUTE);
    assert.equal(r.status, 201);
    assert.equal(r.headers.get('x-api-version'), 'v3');
    assert.equal(r.headers.get('content-type'), 'application/json');
    assert.ok(r.text.endsWith('}\n'));
    const body = r.json as { key: string; value: Record<string, unknown> };
    assert.equal(body.key, '/gateway/routes/1');
    const { create_time, update_time, ...rest } = body.value;
    assert.deepEqual(rest, { ...ROUTE, id: '1' });
    assert.equal(typeof create_time, 'number');
    assert.equal(create_time, update_time);
  });

  it('PUT an existing id answers 200 and keeps create_time; GET one shows both indexes (routes2.t)', async () => {
    const first = await gw.admin('GET', '/gateway/admin/routes/1');
    const r = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, desc: 'changed' });
    assert.equal(r.status, 200);
    const got = await gw.admin('GET', '/gateway/admin/routes/1');
    assert.equal(got.status, 200);
    const b = got.json as { key: string; value: Record<string, unknown>; createdIndex: number; modifiedIndex: number };
    const a = first.json as typeof b;
    assert.equal(b.key, '/gateway/routes/1');
    assert.equal(b.value.desc, 'changed');
    assert.equal(b.value.create_time, a.value.create_time);
    assert.equal(b.createdIndex, a.createdIndex);
    assert.ok(b.modifiedIndex > a.modifiedIndex);
  });

  it('DELETE answers {"deleted":"1","key":...}, then 404 {"message":"Key not found"} (routes2.t)', async () => {
    await gw.admin('PUT', '/gateway/admin/routes/del', ROUTE);
    const r = await gw.admin('DELETE', '/gateway/admin/routes/del');
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { deleted: '1', key: '/gateway/routes/del' });
    const again = await gw.admin('DELETE', '/gateway/admin/routes/del');
    assert.equal(again.status, 404);
    assert.equal(again.text, '{"message":"Key not found"}\n');
    const get = await gw.admin('GET', '/gateway/admin/routes/del');
    assert.deepEqual([get.status, get.json], [404, { message: 'Key not found' }]);
  });

  it('POST generates a 20-digit id; an id in the URL or body is refused (routes.t)', async () => {
    const r = await gw.admin('POST', '/gateway/admin/routes', ROUTE);
    assert.equal(r.status, 201);
    const b = r.json as { key: string; value: { id: string } };
    assert.match(b.value.id, /^\d{20}$/);
    assert.equal(b.key, `/gateway/routes/${b.value.id}`);
    const withId = await gw.admin('POST', '/gateway/admin/routes/1', ROUTE);
    assert.deepEqual([withId.status, withId.json], [400, { error_msg: 'wrong route id, do not need it' }]);
    const bodyId = await gw.admin('POST', '/gateway/admin/routes', { ...ROUTE, id: 1 });
    assert.deepEqual([bodyId.status, bodyId.json], [400, { error_msg: 'wrong route id, do not need it' }]);
  });

  it('PUT takes the id from the body when the URL has none; missing and conflicting ids are refused (routes.t)', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes', { ...ROUTE, id: 7 });
    assert.equal(r.status, 201);
    assert.equal((r.json as { value: { id: unknown } }).value.id, 7);
    const missing = await gw.admin('PUT', '/gateway/admin/routes', ROUTE);
    assert.deepEqual([missing.status, missing.json], [400, { error_msg: 'missing route id' }]);
    const wrong = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, id: 2 });
    assert.deepEqual([wrong.status, wrong.json], [400, { error_msg: 'wrong route id' }]);
    const bad = await gw.admin('PUT', '/gateway/admin/routes/*invalid', ROUTE);
    assert.deepEqual([bad.status, bad.json], [400, { error_msg: 'invalid configuration: property "id" validation failed: object matches none of the required' }]);
  });
});

describe('routes: validation answers APISIX\'s messages and changes nothing', () => {
  it('a bad method names the item (routes.t)', async () => {
    const before = await gw.admin('GET', '/gateway/admin/routes/1');
    const r = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, methods: ['invalid_method'] });
    assert.equal(r.status, 400);
    assert.equal(r.headers.get('x-api-version'), 'v3');
    assert.deepEqual(r.json, { error_msg: 'invalid configuration: property "methods" validation failed: failed to validate item 1: matches none of the enum values' });
    const afterBad = await gw.admin('GET', '/gateway/admin/routes/1');
    assert.deepEqual(afterBad.json, before.json);
  });

  it('create_time and update_time may not be sent (routes3.t)', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, create_time: 1602883670 });
    assert.deepEqual([r.status, r.json], [400, { error_msg: 'the property is forbidden:  create_time' }]);
    const up = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, upstream: { ...ROUTE.upstream, update_time: 1 } });
    assert.deepEqual(up.json, { error_msg: 'the property is forbidden:  upstream.update_time' });
  });

  it('host with hosts, remote_addr with remote_addrs (routes.t)', async () => {
    const h = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, host: 'foo.com', hosts: ['bar.com'] });
    assert.deepEqual([h.status, h.json], [400, { error_msg: 'only one of host or hosts is allowed' }]);
    const a = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, remote_addr: '127.0.0.1', remote_addrs: ['127.0.0.1'] });
    assert.deepEqual(a.json, { error_msg: 'only one of remote_addr or remote_addrs is allowed' });
  });

  it('a bad host pattern, a too long name, a label value with a table (routes.t, routes2.t)', async () => {
    const host = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, host: 'a.*.foo.com' });
    assert.equal(host.status, 400);
    assert.match((host.json as { error_msg: string }).error_msg, /^invalid configuration: property "host" validation failed: failed to match pattern /);
    const name = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, name: 'n'.repeat(257) });
    assert.deepEqual(name.json, { error_msg: 'invalid configuration: property "name" validation failed: string too long, expected at most 256, got 257' });
    const labels = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, labels: { env: ['production'] } });
    assert.deepEqual(labels.json, { error_msg: 'invalid configuration: property "labels" validation failed: failed to validate env (matching ".*"): wrong type: expected string, got table' });
  });

  it('a timeout of 0, a referenced upstream that does not exist, a bad vars operator (routes.t, routes2.t)', async () => {
    const t = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, timeout: { connect: 0, send: 1, read: 1 } });
    assert.deepEqual(t.json, { error_msg: 'invalid configuration: property "timeout" validation failed: property "connect" validation failed: expected 0 to be greater than 0' });
    const { upstream: _u, ...noUpstream } = ROUTE;
    const u = await gw.admin('PUT', '/gateway/admin/routes/1', { ...noUpstream, upstream_id: '99999999' });
    assert.deepEqual([u.status, u.json], [400, { error_msg: 'failed to fetch upstream info by upstream id [99999999], response code: 404' }]);
    const v = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, vars: [['arg_name', '=', 'json']] });
    assert.deepEqual(v.json, { error_msg: "failed to validate the 'vars' expression: invalid operator '='" });
  });

  it('a post_arg path of vars must parse as JSONPath; a good one is stored (routes_request_body.t)', async () => {
    const bad = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, vars: [[['post_arg.items[.kind', '==', 'x']]] });
    assert.deepEqual([bad.status, bad.json], [400, { error_msg: `failed to validate the 'vars' expression: invalid expression "$.items[.kind" near "[.kind"` }]);
    const nested = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, vars: [['OR', ['arg_a', '==', '1'], ['post_arg.a.', '==', 'x']]] });
    assert.deepEqual([nested.status, nested.json], [400, { error_msg: `failed to validate the 'vars' expression: invalid expression "$.a." near "."` }]);
    for (const path of ['post_arg.items[*].parts[*].kind', 'post_arg.model', "post_arg.a['b','c'][0:2]", 'post_arg.list[?(@.n > 1)]']) {
      const ok = await gw.admin('PUT', '/gateway/admin/routes/1', { ...ROUTE, vars: [[path, '==', 'x']] });
      assert.ok(ok.status < 300, `${path}: ${ok.text}`);
    }
  });

  it('a body over 1.5 MiB, a body that is not JSON, a ttl that is not a number (routes_request_body.t, routes4.t)', async () => {
    const big = await gw.admin('PUT', '/gateway/admin/routes/1', JSON.stringify({ ...ROUTE, desc: 'x'.repeat(1678025 - JSON.stringify({ ...ROUTE, desc: '' }).length) }));
    assert.deepEqual([big.status, big.json], [400, { error_msg: 'invalid request body: request size 1678025 is greater than the maximum size 1572864 allowed' }]);
    const bad = await gw.admin('PUT', '/gateway/admin/routes/1', '{a:1}');
    assert.deepEqual([bad.status, bad.json], [400, { error_msg: 'invalid request body: Expected object key string but found invalid token at character 2', req_body: '{a:1}' }]);
    const ttl = await gw.admin('PUT', '/gateway/admin/routes/1?ttl=abc', ROUTE);
    assert.deepEqual([ttl.status, ttl.json], [400, { error_msg: 'invalid argument ttl: should be a number' }]);
    assert.equal(ttl.headers.get('x-api-version'), null);
  });

  it('an unknown resource (api.t)', async () => {
    const r = await gw.admin('GET', '/gateway/admin/routex');
    assert.deepEqual([r.status, r.json], [404, { error_msg: 'Unsupported resource type: routex' }]);
  });
});

describe('routes: ttl', () => {
  it('?ttl= makes the object disappear once it runs out (routes4.t)', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/ttl?ttl=1', ROUTE);
    assert.equal(r.status, 201);
    assert.equal((await gw.admin('GET', '/gateway/admin/routes/ttl')).status, 200);
    for (;;) {
      const got = await gw.admin('GET', '/gateway/admin/routes/ttl');
      if (got.status === 404) break;
      assert.equal(got.status, 200);
    }
  });
});

describe('routes: PATCH', () => {
  it('merges objects, replaces arrays, removes keys set to null (routes2.t)', async () => {
    await gw.admin('PUT', '/gateway/admin/routes/p', { ...ROUTE, upstream: { nodes: { '127.0.0.1:8080': 1, '127.0.0.2:8080': 1 }, type: 'roundrobin' } });
    const r = await gw.admin('PATCH', '/gateway/admin/routes/p', { methods: ['POST', 'GET'], desc: null, upstream: { nodes: { '127.0.0.2:8080': null, '127.0.0.3:8080': 2 } } });
    assert.equal(r.status, 200);
    const v = (r.json as { value: Record<string, unknown> }).value;
    assert.deepEqual(v.methods, ['POST', 'GET']);
    assert.equal(v.desc, undefined);
    assert.deepEqual((v.upstream as { nodes: unknown }).nodes, { '127.0.0.1:8080': 1, '127.0.0.3:8080': 2 });
  });

  it('a sub-path replaces one value; a bad result is refused and changes nothing (routes2.t)', async () => {
    const r = await gw.admin('PATCH', '/gateway/admin/routes/p/methods', ['DELETE']);
    assert.equal(r.status, 200);
    assert.deepEqual((r.json as { value: { methods: string[] } }).value.methods, ['DELETE']);
    const uri = await gw.admin('PATCH', '/gateway/admin/routes/p/uri', '"/patch_test"');
    assert.equal((uri.json as { value: { uri: string } }).value.uri, '/patch_test');
    const bad = await gw.admin('PATCH', '/gateway/admin/routes/p/methods', ['NOPE']);
    assert.equal(bad.status, 400);
    const now = await gw.admin('GET', '/gateway/admin/routes/p');
    assert.deepEqual((now.json as { value: { methods: string[] } }).value.methods, ['DELETE']);
  });

  it('a missing route is 404, an id is required, the body must be an object (routes2.t)', async () => {
    const r = await gw.admin('PATCH', '/gateway/admin/routes/nope', { desc: 'x' });
    assert.deepEqual([r.status, r.json], [404, { message: 'Key not found' }]);
    const noId = await gw.admin('PATCH', '/gateway/admin/routes', { desc: 'x' });
    assert.deepEqual([noId.status, noId.json], [400, { error_msg: 'missing route id' }]);
    const notObj = await gw.admin('PATCH', '/gateway/admin/routes/p', '"x"');
    assert.deepEqual([notObj.status, notObj.json], [400, { error_msg: 'invalid configuration' }]);
  });
});

describe('routes: lists', () => {
  it('filters before paging, so total counts what matched (filter.t, routes3.t)', async () => {
    for (let i = 0; i < 12; i++) {
      await gw.admin('PUT', `/gateway/admin/routes/list${i}`, { ...ROUTE, name: `test${i}`, uri: `/list/${i}`, labels: i % 2 ? { odd: 'yes' } : { even: 'yes' } });
    }
    const page = await gw.admin('GET', '/gateway/admin/routes?name=^test&page=2&page_size=10');
    const b = page.json as { total: number; list: Array<{ value: { name: string } }> };
    assert.equal(b.total, 12);
    assert.deepEqual(b.list.map((x) => x.value.name), ['test10', 'test11']);
    const label = await gw.admin('GET', '/gateway/admin/routes?label=odd');
    assert.equal((label.json as { total: number }).total, 6);
    const uri = await gw.admin('GET', '/gateway/admin/routes?uri=/list/1');
    assert.equal((uri.json as { total: number }).total, 3); // /list/1, /list/10, /list/11
    const size = await gw.admin('GET', '/gateway/admin/routes?page=1&page_size=5');
    assert.deepEqual([size.status, size.text], [400, 'page_size must be between 10 and 500']);
  });

  it('an empty collection lists as {"list":[],"total":0} (routes.t)', async () => {
    const r = await gw.admin('GET', '/gateway/admin/stream_routes');
    assert.equal(r.status, 400); // stream mode is off by default (stream-routes-disable.t)
    assert.deepEqual(r.json, { error_msg: 'stream mode is disabled, can not add stream routes' });
    const s = await gw.admin('GET', '/gateway/admin/protos');
    assert.deepEqual([s.status, s.json], [200, { list: [], total: 0 }]);
  });
});

describe('the proxy port with no matching route', () => {
  it('answers APISIX\'s 404 for no matching route', async () => {
    const r = await fetch(`http://127.0.0.1:${gw.proxyPort}/anything`);
    assert.equal(r.status, 404);
    assert.equal(await r.text(), '{"error_msg":"404 Route Not Found"}\n');
  });
});

/**
 * A route's `filter_func`: the Admin API compiles `return <source>` with
 * the gateway's Lua and wants a function (APISIX's error_msg, Lua 5.4's
 * parser wording after the prefix); the router matches the route only when
 * filter_func(vars) is true, `vars` reading the request's variables.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let origin: Origin;
before(async () => { [gw, origin] = await Promise.all([startGateway({ workers: 2 }), startOrigin()]); });
after(async () => { await Promise.all([gw.stop(), origin.close()]); });

const upstream = () => ({ type: 'roundrobin', nodes: { [origin.node]: 1 } });

describe('Admin API: filter_func', () => {
  it('stores a source that compiles to a function', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/ok', {
      uri: '/ok', filter_func: "function(vars) return vars.arg_name == 'json' end", upstream: upstream(),
    });
    assert.equal(r.status, 201, r.text);
    assert.equal((r.json as { value: { filter_func: string } }).value.filter_func, "function(vars) return vars.arg_name == 'json' end");
  });

  it('refuses what does not compile, or is not a function, and keeps nothing', async () => {
    const cases: Array<[string, string]> = [
      ['function(vars) ', `failed to load 'filter_func' string: [string "return function(vars) "]:1: 'end' expected near '<eof>'`],
      ['function(vars) return vars.a == end', `failed to load 'filter_func' string: [string "return function(vars) return vars.a == end"]:1: unexpected symbol near 'end'`],
      ['function_not_defined', "'filter_func' should be a function"],
    ];
    for (const [source, msg] of cases) {
      const r = await gw.admin('PUT', '/gateway/admin/routes/bad', { uri: '/bad', filter_func: source, upstream: upstream() });
      assert.equal(r.status, 400, `${source}: ${r.text}`);
      assert.deepEqual(r.json, { error_msg: msg });
    }
    // the schema comes first: a source must start with `function`
    const s = await gw.admin('PUT', '/gateway/admin/routes/bad', { uri: '/bad', filter_func: 'return function() end', upstream: upstream() });
    assert.equal(s.status, 400);
    assert.match((s.json as { error_msg: string }).error_msg, /^invalid configuration: property "filter_func" validation failed: failed to match pattern "\^function"/);
    assert.equal((await gw.admin('GET', '/gateway/admin/routes/bad')).status, 404);
  });
});

describe('data plane: filter_func decides the match', () => {
  it('matches only when the function returns true for the request', async () => {
    await put(gw, 'routes/f', {
      uri: '/filtered', upstream: upstream(),
      filter_func: "function(vars) return vars['arg_a1'] == 'a1' and vars.http_x_side == 'left' end",
    });
    const hit = await untilRouted(gw, '/filtered?a1=a1', (r) => r.status === 200, { headers: { 'X-Side': 'left' } });
    assert.equal(hit.echo?.url, '/filtered?a1=a1');
    for (let i = 0; i < 4; i++) {
      assert.equal((await proxy(gw, '/filtered?a1=a1', { headers: { 'X-Side': 'left' } })).status, 200);
      const miss = await proxy(gw, '/filtered?a1=xx', { headers: { 'X-Side': 'left' } });
      assert.equal(miss.status, 404);
      assert.deepEqual(JSON.parse(miss.body), { error_msg: '404 Route Not Found' });
      assert.equal((await proxy(gw, '/filtered?a1=a1')).status, 404);
    }
  });

  it('a route whose filter says no lets a lower-priority one match', async () => {
    await put(gw, 'routes/low', { uri: '/pick', priority: 0, upstream: upstream(), plugins: { 'response-rewrite': { headers: { set: { 'X-Route': 'low' } } } } });
    await put(gw, 'routes/high', {
      uri: '/pick', priority: 10, upstream: upstream(), plugins: { 'response-rewrite': { headers: { set: { 'X-Route': 'high' } } } },
      filter_func: "function(vars) return vars.arg_v == 'high' end",
    });
    await untilRouted(gw, '/pick?v=high', (r) => r.headers['x-route'] === 'high');
    await untilRouted(gw, '/pick?v=other', (r) => r.headers['x-route'] === 'low');
    for (let i = 0; i < 4; i++) {
      assert.equal((await proxy(gw, '/pick?v=high')).headers['x-route'], 'high');
      assert.equal((await proxy(gw, '/pick')).headers['x-route'], 'low');
    }
  });

  it('a filter that raises does not match, and the error log says why', async () => {
    await put(gw, 'routes/raises', { uri: '/raises', upstream: upstream(), filter_func: 'function(vars) return vars.arg_missing.b end' });
    await untilRouted(gw, '/raises?a=1', (r) => r.status === 404);
    const log = () => fs.readFileSync(path.join(gw.prefix, 'logs', 'error.log'), 'utf8');
    const want = /\[error\].*failed to run filter_func: \[string "return function\(vars\) return vars\.arg_missing\.\.\."\]:1: attempt to index a nil value \(field 'arg_missing'\), client: 127\.0\.0\.1, .*request: "GET \/raises\?a=1 HTTP\/1\.1"/;
    for (let i = 0; i < 200 && !want.test(log()); i++) await sleep(20);
    assert.match(log(), want);
  });
});

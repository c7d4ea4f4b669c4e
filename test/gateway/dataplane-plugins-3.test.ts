/**
 * fault-injection, mocking, uri-blocker, ua-restriction and
 * referer-restriction on the gateway's request path against a loopback
 * origin (what t/plugin/fault-injection.t, mocking.t, uri-blocker.t,
 * ua-restriction.t and referer-restriction.t check, in our own cases), and
 * the Admin API's refusals with APISIX's messages.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { GATEHOUSE_VERSION } from '../../src/core/version.ts';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { assertRefused, proxy, put, routeTo, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let o: Origin;

before(async () => {
  [gw, o] = await Promise.all([startGateway(), startOrigin((req, res) => {
    if (!req.url?.startsWith('/hello')) return false;
    res.setHeader('Content-Type', 'text/plain');
    res.end('from origin\n');
    return true;
  })]);
});
after(async () => { await Promise.all([gw.stop(), o.close()]); });

const route = (uri: string, plugins: Record<string, unknown>) => routeTo(o, uri, plugins);
const fromOrigin = (x: { body: string }) => x.body === 'from origin\n';
const refused = (plugins: Record<string, unknown>, message: string) => assertRefused(gw, o, plugins, message);

describe('fault-injection', () => {
  it('abort answers http_status with the body, its $vars and headers resolved', async () => {
    await put(gw, 'routes/fi', route('/hello/fi', { 'fault-injection': { abort: {
      http_status: 418, body: 'client ${remote_addr} asked ${ arg_q ?? nothing } $uri\n', headers: { 'X-Fault': 'on $arg_q', 'X-Num': 7 },
    } } }));
    const r = await untilRouted(gw, '/hello/fi?q=tea', (x) => x.status === 418);
    assert.equal(r.body, 'client 127.0.0.1 asked tea /hello/fi\n');
    assert.equal(r.headers['x-fault'], 'on tea');
    assert.equal(r.headers['x-num'], '7');
    assert.equal((await proxy(gw, '/hello/fi')).body, 'client 127.0.0.1 asked nothing /hello/fi\n');
  });

  it('abort without a body answers the status alone; an escaped dollar stays', async () => {
    await put(gw, 'routes/fi', route('/hello/fi', { 'fault-injection': { abort: { http_status: 200 } } }));
    const r = await untilRouted(gw, '/hello/fi', (x) => !fromOrigin(x));
    assert.equal(r.status, 200);
    assert.equal(r.body, '');
    await put(gw, 'routes/fi', route('/hello/fi', { 'fault-injection': { abort: { http_status: 403, body: 'cost \\$uri' } } }));
    const e = await untilRouted(gw, '/hello/fi', (x) => x.status === 403);
    assert.equal(e.body, 'cost \\$uri');
  });

  it('percentage 0 never aborts; vars choose the requests (any expression, each ANDed)', async () => {
    await put(gw, 'routes/fi', route('/hello/fi', { 'fault-injection': { abort: { http_status: 403, body: 'x', percentage: 0 } } }));
    await untilRouted(gw, '/hello/fi', fromOrigin);
    for (let i = 0; i < 5; i++) assert.equal((await proxy(gw, '/hello/fi')).status, 200);
    await put(gw, 'routes/fi', route('/hello/fi', { 'fault-injection': { abort: { http_status: 403, body: 'denied', vars: [
      [['arg_name', '==', 'jack'], ['arg_age', '!', '<', 18]],
      [['http_apikey', '==', 'k1']],
    ] } } }));
    const hit = await untilRouted(gw, '/hello/fi?name=jack&age=20', (x) => x.status === 403);
    assert.equal(hit.body, 'denied');
    assert.equal((await proxy(gw, '/hello/fi?name=jack&age=12')).status, 200);
    assert.equal((await proxy(gw, '/hello/fi?name=rose&age=30')).status, 200);
    assert.equal((await proxy(gw, '/hello/fi', { headers: { apikey: 'k1' } })).status, 403);
    assert.equal((await proxy(gw, '/hello/fi')).status, 200);
  });

  it('a vars expression led by a logic operator; a brace after a $var is text', async () => {
    await put(gw, 'routes/fi', route('/hello/fi', { 'fault-injection': { abort: { http_status: 403, body: '{"n": $arg_n}', vars: [
      ['!AND', ['arg_name', '==', 'jack'], ['arg_age', '!', '<', 18]],
      ['OR', [['arg_a', '==', '1'], ['arg_b', '==', '2']], ['arg_c', '==', '3']],
    ] } } }));
    const hit = await untilRouted(gw, '/hello/fi?name=jack&age=17&n=2', (x) => x.status === 403);
    assert.equal(hit.body, '{"n": 2}');
    assert.equal((await proxy(gw, '/hello/fi?name=jack&age=18')).status, 200);
    // the second expression: a and b together, or c
    assert.equal((await proxy(gw, '/hello/fi?name=jack&age=18&a=1&b=2')).status, 403);
    assert.equal((await proxy(gw, '/hello/fi?name=jack&age=18&a=1')).status, 200);
    assert.equal((await proxy(gw, '/hello/fi?name=jack&age=18&c=3')).status, 403);
  });

  it('delay waits duration seconds before the upstream, or before the abort', async () => {
    await put(gw, 'routes/fi', route('/hello/fi', { 'fault-injection': { delay: { duration: 0.3 } } }));
    await untilRouted(gw, '/hello/fi', fromOrigin);
    let t0 = Date.now();
    assert.equal((await proxy(gw, '/hello/fi')).body, 'from origin\n');
    assert.ok(Date.now() - t0 >= 290, `waited ${Date.now() - t0} ms`);
    await put(gw, 'routes/fi', route('/hello/fi', { 'fault-injection': {
      delay: { duration: 0.3, vars: [[['arg_slow', '==', '1']]] }, abort: { http_status: 503, body: 'late\n' },
    } }));
    await untilRouted(gw, '/hello/fi', (x) => x.status === 503);
    t0 = Date.now();
    assert.equal((await proxy(gw, '/hello/fi?slow=1')).body, 'late\n');
    assert.ok(Date.now() - t0 >= 290, `waited ${Date.now() - t0} ms`);
  });

  it('the Admin API refuses what APISIX refuses', async () => {
    const pre = 'failed to check the configuration of plugin fault-injection err: ';
    await refused({ 'fault-injection': {} }, `${pre}expect object to have at least 1 properties`);
    await refused({ 'fault-injection': { abort: { body: 'x' } } }, `${pre}property "abort" validation failed: property "http_status" is required`);
    await refused({ 'fault-injection': { delay: { duration: 'a' } } }, `${pre}property "delay" validation failed: property "duration" validation failed: wrong type: expected number, got string`);
    await refused({ 'fault-injection': { abort: { http_status: 403, vars: [['arg_name', '==', 'jack']] } } }, `${pre}rule should be wrapped inside brackets`);
    await refused({ 'fault-injection': { delay: { duration: 1, vars: [[['arg_name', 'like', 'jack']]] } } }, `${pre}invalid operator 'like'`);
  });
});

describe('mocking', () => {
  it('response_example with its $vars, the content type, x-mock-by and response_headers', async () => {
    await put(gw, 'routes/mk', route('/hello/mk', { mocking: {
      content_type: 'text/plain', response_status: 201, response_example: 'addr:$remote_addr unset:$foo',
      response_headers: { 'X-Mocked': 'yes, $uri', 'X-Count': 2 },
    } }));
    const r = await untilRouted(gw, '/hello/mk', (x) => x.status === 201);
    assert.equal(r.body, 'addr:127.0.0.1 unset:');
    // APISIX's nginx.conf has `charset utf-8`: text/plain is one of charset_types
    assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(r.headers['x-mock-by'], `APISIX/${GATEHOUSE_VERSION}`);
    assert.equal(r.headers['x-mocked'], 'yes, /hello/mk');
    assert.equal(r.headers['x-count'], '2');
  });

  it('response_schema: examples are used, other values made up by type', async () => {
    await put(gw, 'routes/mk', route('/hello/mk', { mocking: { with_mock_header: false, response_schema: { type: 'object', properties: {
      s: { type: 'string', example: 'hi' }, i: { type: 'integer', example: 4.7 }, n: { type: 'number', example: 5.5 }, b: { type: 'boolean', example: true },
      o: { type: 'object' }, free: { type: 'string' }, count: { type: 'integer' }, list: { type: 'array', items: { type: 'boolean' } },
    } } } }));
    const r = await untilRouted(gw, '/hello/mk', (x) => x.status === 200 && !fromOrigin(x));
    assert.equal(r.headers['content-type'], 'application/json;charset=utf8');
    assert.equal(r.headers['x-mock-by'], undefined);
    const j = JSON.parse(r.body) as Record<string, unknown>;
    assert.deepEqual({ s: j.s, i: j.i, n: j.n, b: j.b, o: j.o }, { s: 'hi', i: 4, n: 5.5, b: true, o: {} });
    assert.match(j.free as string, /^[a-z]{1,10}$/);
    assert.ok(Number.isInteger(j.count) && (j.count as number) >= 1 && (j.count as number) <= 10000);
    assert.ok(Array.isArray(j.list) && j.list.length >= 1 && j.list.length <= 3 && j.list.every((x) => typeof x === 'boolean'));
  });

  it('response_schema as XML under a data root', async () => {
    await put(gw, 'routes/mk', route('/hello/mk', { mocking: { content_type: 'application/xml', response_schema: { properties: { name: { type: 'string', example: 'jack' } } } } }));
    const r = await untilRouted(gw, '/hello/mk', (x) => x.body.startsWith('<data>'));
    assert.equal(r.body, '<data>\n  <name>jack</name>\n</data>\n');
    assert.equal(r.headers['content-type'], 'application/xml');
  });

  it('delay waits that many seconds', async () => {
    await put(gw, 'routes/mk', route('/hello/mk', { mocking: { delay: 1, response_example: 'slow' } }));
    await untilRouted(gw, '/hello/mk', (x) => x.body === 'slow');
    const t0 = Date.now();
    assert.equal((await proxy(gw, '/hello/mk')).body, 'slow');
    assert.ok(Date.now() - t0 >= 990, `waited ${Date.now() - t0} ms`);
  });

  it('the Admin API refuses what APISIX refuses', async () => {
    const pre = 'failed to check the configuration of plugin mocking err: ';
    await refused({ mocking: { content_type: 'image/png', response_example: 'x' } }, `${pre}unsupported content type!`);
    await refused({ mocking: { delay: 1 } }, `${pre}object matches none of the required: ["response_example"] or ["response_schema"]`);
    await refused({ mocking: { response_status: 99, response_example: 'x' } }, `${pre}property "response_status" validation failed: expected 99 to be at least 100`);
  });
});

describe('uri-blocker', () => {
  it('a rule found in the request uri (arguments too, not decoded) gets 403 and nginx\'s page', async () => {
    await put(gw, 'routes/ub', route('/hello/ub', { 'uri-blocker': { block_rules: ['aa', 'c\\d+', 'select.+(from|limit)'] } }));
    const r = await untilRouted(gw, '/hello/ub?x=aa', (x) => x.status === 403);
    assert.match(r.body, /<title>403 Forbidden<\/title>/);
    assert.equal((await proxy(gw, '/hello/ub?c1=2')).status, 403);
    assert.equal((await proxy(gw, '/hello/ub?name=;select%20from%20t')).status, 403);
    assert.equal((await proxy(gw, '/hello/ub?cc=2')).body, 'from origin\n');
    assert.equal((await proxy(gw, '/hello/ub?x=AA')).status, 200);
  });

  it('rejected_code, rejected_msg and case_insensitive', async () => {
    await put(gw, 'routes/ub', route('/hello/ub*', { 'uri-blocker': { block_rules: ['^/hello/ub/x', 'aa'], rejected_code: 410, rejected_msg: 'access is not allowed', case_insensitive: true } }));
    const r = await untilRouted(gw, '/hello/ub/X', (x) => x.status === 410);
    assert.deepEqual(JSON.parse(r.body), { error_msg: 'access is not allowed' });
    assert.equal((await proxy(gw, '/hello/ub?q=AA')).status, 410);
    assert.equal((await proxy(gw, '/hello/ub/y')).status, 200);
  });

  it('the Admin API refuses a rule that does not compile, with PCRE\'s message', async () => {
    const pre = 'failed to check the configuration of plugin uri-blocker err: ';
    await refused({ 'uri-blocker': { block_rules: ['^b('] } }, `${pre}pcre_compile() failed: missing ) in "^b("`);
    await refused({ 'uri-blocker': { block_rules: ['^a'], rejected_msg: '' } }, `${pre}property "rejected_msg" validation failed: string too short, expected at least 1, got 0`);
    await refused({ 'uri-blocker': { block_rules: ['a', 'a'] } }, `${pre}property "block_rules" validation failed: expected unique items but items 1 and 2 are equal`);
  });
});

describe('ua-restriction', () => {
  it('denylist: a matching User-Agent (any of several) is refused, others pass', async () => {
    await put(gw, 'routes/ua', route('/hello/ua', { 'ua-restriction': { denylist: ['my-bot1', '(Baidu|Google)spider'] } }));
    const r = await untilRouted(gw, '/hello/ua', (x) => x.status === 403, { headers: { 'User-Agent': 'Baiduspider/3.0' } });
    assert.deepEqual(JSON.parse(r.body), { message: 'Not allowed' });
    assert.equal((await proxy(gw, '/hello/ua', { headers: { 'User-Agent': ['my-bot2', 'my-bot1'] } })).status, 403);
    assert.equal((await proxy(gw, '/hello/ua', { headers: { 'User-Agent': 'foo/bar' } })).body, 'from origin\n');
    // no User-Agent: refused unless bypass_missing
    assert.equal((await proxy(gw, '/hello/ua')).status, 403);
  });

  it('allowlist: one matching User-Agent is enough; message; bypass_missing', async () => {
    await put(gw, 'routes/ua', route('/hello/ua', { 'ua-restriction': { allowlist: ['^my-bot\\d'], message: 'bots only', bypass_missing: true } }));
    const r = await untilRouted(gw, '/hello/ua', (x) => x.status === 403, { headers: { 'User-Agent': 'foo/bar' } });
    assert.deepEqual(JSON.parse(r.body), { message: 'bots only' });
    assert.equal((await proxy(gw, '/hello/ua', { headers: { 'User-Agent': ['foo/bar', '  my-bot1'] } })).status, 200);
    assert.equal((await proxy(gw, '/hello/ua')).status, 200);
  });

  it('the Admin API refuses what APISIX refuses', async () => {
    const pre = 'failed to check the configuration of plugin ua-restriction err: ';
    await refused({ 'ua-restriction': { allowlist: ['a'], denylist: ['b'] } }, `${pre}value should match only one schema, but matches both schemas 1 and 2`);
    await refused({ 'ua-restriction': {} }, `${pre}value should match only one schema, but matches none`);
    await refused({ 'ua-restriction': { denylist: ['x'], message: '' } }, `${pre}property "message" validation failed: string too short, expected at least 1, got 0`);
    await refused({ 'ua-restriction': { denylist: ['(bot'] } }, `${pre}pcre_compile() failed: missing ) in "(bot"`);
  });
});

describe('referer-restriction', () => {
  it('whitelist: exact hosts and *.suffix; no Referer or a malformed one is refused', async () => {
    await put(gw, 'routes/rf', route('/hello/rf', { 'referer-restriction': { whitelist: ['*.xx.com', 'yy.com'] } }));
    const r = await untilRouted(gw, '/hello/rf', (x) => x.status === 403, { headers: { Referer: 'https://www.yy.com/am' } });
    assert.deepEqual(JSON.parse(r.body), { message: 'Your referer host is not allowed' });
    assert.equal((await proxy(gw, '/hello/rf', { headers: { Referer: 'http://www.xx.com' } })).status, 200);
    assert.equal((await proxy(gw, '/hello/rf', { headers: { Referer: 'https://yy.com:8443/am?x=1' } })).status, 200);
    assert.equal((await proxy(gw, '/hello/rf')).status, 403);
    assert.equal((await proxy(gw, '/hello/rf', { headers: { Referer: 'yy.com' } })).status, 403);
  });

  it('blacklist with a message; bypass_missing lets a missing or malformed Referer through', async () => {
    await put(gw, 'routes/rf', route('/hello/rf', { 'referer-restriction': { blacklist: ['*.xx.com'], message: 'Your referer host is deny', bypass_missing: true } }));
    const r = await untilRouted(gw, '/hello/rf', (x) => x.status === 403, { headers: { Referer: 'http://www.xx.com/a' } });
    assert.deepEqual(JSON.parse(r.body), { message: 'Your referer host is deny' });
    assert.equal((await proxy(gw, '/hello/rf', { headers: { Referer: 'https://yy.com' } })).status, 200);
    assert.equal((await proxy(gw, '/hello/rf', { headers: { Referer: 'www.xx.com' } })).status, 200);
    assert.equal((await proxy(gw, '/hello/rf')).status, 200);
  });

  it('the Admin API refuses what APISIX refuses', async () => {
    const pre = 'failed to check the configuration of plugin referer-restriction err: ';
    await refused({ 'referer-restriction': { whitelist: ['a.com'], blacklist: ['b.com'] } }, `${pre}value should match only one schema, but matches both schemas 1 and 2`);
    // the pattern quoted as lua-resty-jsonschema quotes it (%q: each backslash doubled)
    await refused({ 'referer-restriction': { whitelist: ['a b'] } }, `${pre}property "whitelist" validation failed: failed to validate item 1: failed to match pattern "^\\\\*$|^\\\\*?[0-9a-zA-Z-._\\\\[\\\\]:]+$" with "a b"`);
  });
});

/**
 * request-validation, api-breaker, client-control, proxy-control and echo
 * on the gateway's request path against loopback origins (what
 * t/plugin/request-validation.t, api-breaker.t, client-control.t,
 * proxy-control.t and echo.t check, in our own cases), and the Admin API's
 * refusals with APISIX's messages.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { assertRefused, proxy, put, routeTo, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let o: Origin;
/** The origin's answer to /flaky: 500 while true. */
let failing = false;

before(async () => {
  [gw, o] = await Promise.all([startGateway(), startOrigin((req, res) => {
    if (req.url?.startsWith('/flaky')) {
      res.statusCode = failing ? 500 : 200;
      res.end(failing ? 'origin failed\n' : 'origin fine\n');
      return true;
    }
    if (!req.url?.startsWith('/hello')) return false;
    res.setHeader('Content-Type', 'text/plain');
    res.end('from origin\n');
    return true;
  })]);
});
after(async () => { await Promise.all([gw.stop(), o.close()]); });

const route = (uri: string, plugins: Record<string, unknown>) => routeTo(o, uri, plugins);
const refused = (plugins: Record<string, unknown>, message: string) => assertRefused(gw, o, plugins, message);

const json = (body: string, headers: Record<string, string> = {}) => ({ method: 'POST', body, headers: { 'Content-Type': 'application/json', ...headers } });

describe('request-validation', () => {
  const bodySchema = { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 3 }, age: { type: 'integer' } } };

  it('refuses a conf without either schema, and schemas that cannot be used', async () => {
    const p = 'failed to check the configuration of plugin request-validation err: ';
    await refused({ 'request-validation': {} }, `${p}object matches none of the required: ["header_schema"] or ["body_schema"]`);
    await refused({ 'request-validation': { body_schema: { type: 'text' } } }, `${p}invalid JSON type: text`);
    await refused({ 'request-validation': { header_schema: { properties: { a: { type: 'string', enum: 'one' } } } } },
      `${p}bad argument #1 to 'ipairs' (table expected, got string)`);
    await refused({ 'request-validation': { body_schema: {}, rejected_code: 600 } }, `${p}property "rejected_code" validation failed: expected 600 to be at most 599`);
  });

  it('a JSON body that fails answers 400 with the reason; one that passes goes upstream re-encoded', async () => {
    await put(gw, 'routes/rv', route('/rv', { 'request-validation': { body_schema: bodySchema } }));
    const bad = await untilRouted(gw, '/rv', (x) => x.status === 400, json('{"age": 20}'));
    assert.equal(bad.body, 'property "name" is required');
    const short = await proxy(gw, '/rv', json('{"name": "al"}'));
    assert.equal(short.status, 400);
    assert.equal(short.body, 'property "name" validation failed: string too short, expected at least 3, got 2');
    // the last of two same keys is the one checked, and the only one the upstream sees
    const ok = await proxy(gw, '/rv', json('{"name": "x", "path": "a/b", "name": "alice"}'));
    assert.equal(ok.status, 200);
    assert.equal(ok.echo?.body, '{"name":"alice","path":"a\\/b"}');
    assert.equal(ok.echo?.headers['content-length'], String(ok.echo?.body.length));
  });

  it('a body that is not JSON, none, or two Content-Types are refused', async () => {
    await put(gw, 'routes/rv', route('/rv', { 'request-validation': { body_schema: bodySchema } }));
    await untilRouted(gw, '/rv', (x) => x.status === 200, json('{"name": "alice"}'));
    const broken = await proxy(gw, '/rv', json('{"name": '));
    assert.equal(broken.status, 400);
    assert.match(broken.body, /^Expected .* at character \d+$/);
    assert.equal((await proxy(gw, '/rv', { method: 'POST' })).status, 400);
    const twice = await proxy(gw, '/rv', { method: 'POST', body: '{"name": "alice"}', headers: { 'Content-Type': ['application/json', 'text/plain'] } });
    assert.equal(twice.status, 400);
    await put(gw, 'routes/rv', route('/rv', { 'request-validation': { body_schema: bodySchema, max_req_body_size: 8, rejected_msg: 'too much' } }));
    const big = await untilRouted(gw, '/rv', (x) => x.status === 400, json('{"name": "alice"}'));
    assert.equal(big.body, 'too much');
    assert.equal((await proxy(gw, '/rv', json('{"n": 1}'))).body, 'too much');
  });

  it('a form body is decoded as one and passed on as sent', async () => {
    await put(gw, 'routes/rv', route('/rv', { 'request-validation': { body_schema: bodySchema } }));
    const form = (body: string) => ({ method: 'POST', body, headers: { 'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8' } });
    const bad = await untilRouted(gw, '/rv', (x) => x.status === 400, form('name=al&x=1'));
    assert.equal(bad.body, 'property "name" validation failed: string too short, expected at least 3, got 2');
    const ok = await proxy(gw, '/rv', form('name=ali%20ce&x=1'));
    assert.equal(ok.status, 200);
    assert.equal(ok.echo?.body, 'name=ali%20ce&x=1');
  });

  it('header_schema checks the headers; rejected_code and rejected_msg answer instead of the reason', async () => {
    await put(gw, 'routes/rv', route('/rv', { 'request-validation': {
      header_schema: { type: 'object', required: ['x-token'], properties: { 'x-token': { type: 'string', pattern: '^t-' } } },
    } }));
    const missing = await untilRouted(gw, '/rv', (x) => x.status === 400);
    assert.equal(missing.body, 'property "x-token" is required');
    assert.equal((await proxy(gw, '/rv', { headers: { 'X-Token': 't-1' } })).status, 200);
    const wrong = await proxy(gw, '/rv', { headers: { 'X-Token': 'u-1' } });
    assert.equal(wrong.body, 'property "x-token" validation failed: failed to match pattern "^t-" with "u-1"');
    await put(gw, 'routes/rv', route('/rv', { 'request-validation': {
      header_schema: { type: 'object', required: ['x-token'] }, rejected_code: 403, rejected_msg: 'no token, no entry',
    } }));
    const denied = await untilRouted(gw, '/rv', (x) => x.status === 403);
    assert.equal(denied.body, 'no token, no entry');
  });
});

describe('api-breaker', () => {
  it('refuses a conf without break_response_code or with statuses out of range', async () => {
    const p = 'failed to check the configuration of plugin api-breaker err: ';
    await refused({ 'api-breaker': {} }, `${p}property "break_response_code" is required`);
    await refused({ 'api-breaker': { break_response_code: 502, unhealthy: { http_statuses: [404] } } },
      `${p}property "unhealthy" validation failed: property "http_statuses" validation failed: failed to validate item 1: expected 404 to be at least 500`);
    await refused({ 'api-breaker': { break_response_code: 502, max_breaker_sec: 2 } }, `${p}property "max_breaker_sec" validation failed: expected 2 to be at least 3`);
  });

  it('opens after `failures` failures, answers break_response_code, and closes after `successes` successes', async () => {
    failing = false;
    await put(gw, 'routes/ab', route('/flaky', { 'api-breaker': {
      break_response_code: 502, break_response_body: 'breaker open\n',
      break_response_headers: [{ key: 'X-Breaker', value: '$uri' }, { key: 'X-Breaker', value: 'open' }],
      max_breaker_sec: 3, unhealthy: { http_statuses: [500, 503], failures: 2 }, healthy: { successes: 1 },
    } }));
    await untilRouted(gw, '/flaky', (x) => x.body === 'origin fine\n');
    failing = true;
    assert.equal((await proxy(gw, '/flaky')).status, 500);
    assert.equal((await proxy(gw, '/flaky')).status, 500);
    const open = await proxy(gw, '/flaky');
    assert.equal(open.status, 502);
    assert.equal(open.body, 'breaker open\n');
    assert.equal(open.headers['x-breaker'], '/flaky, open');
    // the break lasts 2 s here (2^1); afterwards requests reach the origin, and one success closes it
    failing = false;
    const closed = await untilRouted(gw, '/flaky', (x) => x.status === 200, {}, 20_000);
    assert.equal(closed.body, 'origin fine\n');
    failing = true;
    // counting starts again from nothing: one failure does not open it
    assert.equal((await proxy(gw, '/flaky')).status, 500);
    assert.equal((await proxy(gw, '/flaky')).status, 500);
    failing = false;
    const second = await proxy(gw, '/flaky');
    assert.equal(second.status, 502);
    assert.equal(second.body, 'breaker open\n');
    await untilRouted(gw, '/flaky', (x) => x.status === 200, {}, 20_000);
  });

  it('without a body the code goes out alone (with nginx\'s page), and no headers', async () => {
    failing = true;
    await put(gw, 'routes/ab', route('/flaky-bare', { 'api-breaker': {
      break_response_code: 503, break_response_headers: [{ key: 'X-Breaker', value: 'open' }], unhealthy: { failures: 1 },
    } }));
    await untilRouted(gw, '/flaky-bare', (x) => x.body === 'origin failed\n');
    const open = await untilRouted(gw, '/flaky-bare', (x) => x.status === 503);
    assert.match(open.body, /503 Service Temporarily Unavailable/);
    assert.equal(open.headers['x-breaker'], undefined);
    failing = false;
  });

  it('a Content-Type among the break headers is the answer\'s type, the last one given', async () => {
    failing = true;
    await put(gw, 'routes/ab', route('/flaky-typed', { 'api-breaker': {
      break_response_code: 599, break_response_body: '{"message":"open"}', unhealthy: { failures: 1 },
      break_response_headers: [{ key: 'Content-Type', value: 'application/json' }, { key: 'Content-Type', value: 'application/json+v1' }],
    } }));
    const open = await untilRouted(gw, '/flaky-typed', (x) => x.status === 599);
    assert.equal(open.headers['content-type'], 'application/json+v1');
    assert.equal(open.body, '{"message":"open"}');
    failing = false;
  });
});

/** A chunked POST of `pieces`, the next one sent when `between` resolves. */
function chunkedPost(path: string, pieces: string[], between: () => Promise<void>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: gw.proxyPort, path, method: 'POST', agent: false, headers: { 'Transfer-Encoding': 'chunked' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    void (async () => {
      for (let i = 0; i < pieces.length; i++) {
        if (i > 0) await between();
        req.write(pieces[i]);
      }
      req.end();
    })();
  });
}

describe('client-control', () => {
  it('refuses a negative max_body_size', async () => {
    await refused({ 'client-control': { max_body_size: -1 } },
      'failed to check the configuration of plugin client-control err: property "max_body_size" validation failed: expected -1 to be at least 0');
  });

  it('a body over max_body_size is a 413, whether its length is announced or not', async () => {
    await put(gw, 'routes/cc', route('/cc', { 'client-control': { max_body_size: 5 } }));
    const over = await untilRouted(gw, '/cc', (x) => x.status === 413, { method: 'POST', body: 'hello world' });
    assert.match(over.body, /413 Request Entity Too Large/);
    const small = await proxy(gw, '/cc', { method: 'POST', body: 'hey' });
    assert.equal(small.status, 200);
    assert.equal(small.echo?.body, 'hey');
    assert.equal((await chunkedPost('/cc', ['hel', 'lo world'], async () => undefined)).status, 413);
  });

  it('no limit by default (APISIX\'s client_max_body_size 0), and 0 lifts a limit', async () => {
    const big = 'x'.repeat(1536 * 1024);
    await put(gw, 'routes/cc', route('/cc', {}));
    const plain = await untilRouted(gw, '/cc', (x) => x.status === 200, { method: 'POST', body: big });
    assert.equal(plain.echo?.body.length, big.length);
    await put(gw, 'routes/cc', route('/cc', { 'client-control': { max_body_size: 1024 } }));
    await untilRouted(gw, '/cc', (x) => x.status === 413, { method: 'POST', headers: { 'Transfer-Encoding': 'chunked' }, body: big });
    await put(gw, 'routes/cc', route('/cc', { 'client-control': { max_body_size: 0 } }));
    const r = await untilRouted(gw, '/cc', (x) => x.status === 200, { method: 'POST', headers: { 'Transfer-Encoding': 'chunked' }, body: big });
    assert.equal(r.echo?.body.length, big.length);
  });
});

describe('proxy-control', () => {
  let origin: http.Server;
  let port = 0;
  /** Requests whose head reached the origin. */
  let heads = 0;

  before(async () => {
    origin = http.createServer((req, res) => {
      heads++;
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => res.end(JSON.stringify({ body: Buffer.concat(chunks).toString(), te: req.headers['transfer-encoding'] ?? null, cl: req.headers['content-length'] ?? null })));
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    port = (origin.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => { origin.closeAllConnections(); origin.close(() => resolve()); }));

  const pcRoute = (conf: Record<string, unknown>) => ({ uri: '/pc', plugins: { 'proxy-control': conf }, upstream: { type: 'roundrobin', nodes: { [`127.0.0.1:${port}`]: 1 } } });

  it('request_buffering false streams the body upstream as it comes', async () => {
    await put(gw, 'routes/pc', pcRoute({ request_buffering: false }));
    await untilRouted(gw, '/pc', (x) => x.body.startsWith('{"body"'));
    const before = heads;
    const r = await chunkedPost('/pc', ['first ', 'second'], async () => {
      // the origin has the request before the body's end was sent
      const deadline = Date.now() + 20_000;
      while (heads === before) {
        if (Date.now() > deadline) throw new Error('the request did not reach the origin before its body ended');
        await sleep(10);
      }
    });
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.body), { body: 'first second', te: 'chunked', cl: null });
  });

  it('request_buffering true (the default) sends the body whole, with its length', async () => {
    await put(gw, 'routes/pc', pcRoute({}));
    await untilRouted(gw, '/pc', (x) => x.body.startsWith('{"body"'));
    const r = await chunkedPost('/pc', ['first ', 'second'], () => sleep(50));
    assert.deepEqual(JSON.parse(r.body), { body: 'first second', te: null, cl: '12' });
  });
});

describe('echo', () => {
  it('refuses a conf without a body part', async () => {
    const p = 'failed to check the configuration of plugin echo err: ';
    await refused({ echo: {} }, `${p}expect object to have at least 1 properties`);
    await refused({ echo: { headers: { 'X-A': 'b' } } }, `${p}object matches none of the required: ["before_body"] or ["body"] or ["after_body"]`);
  });

  it('before_body and after_body wrap the upstream body; headers are set', async () => {
    await put(gw, 'routes/echo', route('/hello/echo', { echo: { before_body: '<<', after_body: '>>\n', headers: { 'X-Echo': 'yes', 'X-Count': 3 } } }));
    const r = await untilRouted(gw, '/hello/echo', (x) => x.body.startsWith('<<'));
    assert.equal(r.body, '<<from origin\n>>\n');
    assert.equal(r.headers['x-echo'], 'yes');
    assert.equal(r.headers['x-count'], '3');
    assert.equal(r.headers['content-length'], undefined);
  });

  it('body replaces the upstream body, still wrapped', async () => {
    await put(gw, 'routes/echo', route('/hello/echo', { echo: { before_body: '[', body: 'echoed', after_body: ']' } }));
    const r = await untilRouted(gw, '/hello/echo', (x) => x.body.startsWith('['));
    assert.equal(r.body, '[echoed]');
    await put(gw, 'routes/echo', route('/hello/echo', { echo: { body: 'only this' } }));
    assert.equal((await untilRouted(gw, '/hello/echo', (x) => x.body === 'only this')).status, 200);
  });
});

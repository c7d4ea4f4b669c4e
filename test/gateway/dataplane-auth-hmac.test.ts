/**
 * hmac-auth on the gateway's request path against a loopback origin, with
 * signatures this test computes itself (node:crypto): the signing string,
 * the Date and its clock skew, signed_headers, the body digest and its size
 * limit, hide_credentials; and the Admin API's consumer checks
 * (t/plugin/hmac-auth*.t, restated in our own cases).
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let o: Origin;

before(async () => { [gw, o] = await Promise.all([startGateway(), startOrigin()]); });
after(async () => { await Promise.all([gw.stop(), o.close()]); });

const up = () => ({ type: 'roundrobin', nodes: { [o.node]: 1 } });
const VAGUE = '{"message":"client request can\'t be validated"}\n';

interface Signing { keyId?: string; secret?: string; algorithm?: string; method?: string; target?: string; date?: Date; signed?: string[]; extra?: Record<string, string>; body?: string }

/** Request headers carrying a Signature over keyId, then each signed header's `name: value` (or the request target). */
function signed(s: Signing = {}): Record<string, string> {
  const keyId = s.keyId ?? 'ak';
  const algorithm = s.algorithm ?? 'hmac-sha256';
  const date = (s.date ?? new Date()).toUTCString();
  const headers: Record<string, string> = { Date: date, ...s.extra };
  if (s.body !== undefined) headers.Digest = `SHA-256=${crypto.createHash('sha256').update(s.body).digest('base64')}`;
  const names = s.signed ?? ['@request-target', 'date', ...Object.keys(s.extra ?? {})];
  const lines = [keyId];
  for (const n of names) {
    if (n === '@request-target') lines.push(`${s.method ?? 'GET'} ${s.target ?? '/hm'}`);
    else lines.push(`${n}: ${Object.entries(headers).find(([k]) => k.toLowerCase() === n.toLowerCase())![1]}`);
  }
  const sig = crypto.createHmac(algorithm.slice(5), s.secret ?? 'sk-secret').update(lines.join('\n') + '\n').digest('base64');
  headers.Authorization = `Signature keyId="${keyId}",algorithm="${algorithm}",headers="${names.join(' ')}",signature="${sig}"`;
  return headers;
}

describe('hmac-auth: the Admin API checks consumer and route confs', () => {
  const prefix = 'invalid plugins configuration: failed to check the configuration of plugin hmac-auth err: ';
  it('key_id and secret_key are required, at most 256 characters', async () => {
    const msg = async (conf: Record<string, unknown>) => {
      const r = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'bad', plugins: { 'hmac-auth': conf } });
      assert.equal(r.status, 400);
      return (r.json as { error_msg: string }).error_msg;
    };
    assert.equal(await msg({ key_id: 'a' }), `${prefix}property "secret_key" is required`);
    assert.equal(await msg({ secret_key: 'a' }), `${prefix}property "key_id" is required`);
    assert.equal(await msg({ key_id: 'k'.repeat(300), secret_key: 'a' }), `${prefix}property "key_id" validation failed: string too long, expected at most 256, got 300`);
    const schema = await gw.admin('GET', '/gateway/admin/plugins/hmac-auth?schema_type=consumer');
    assert.deepEqual((schema.json as { encrypt_fields: string[] }).encrypt_fields, ['secret_key']);
  });

  it('a route needs at least one allowed algorithm and a clock_skew of at least 1', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/bad', { uri: '/x', upstream: up(), plugins: { 'hmac-auth': { allowed_algorithms: [] } } });
    assert.equal(r.status, 400);
    assert.match(r.text, /allowed_algorithms.*expect array to have at least 1 items/);
    const z = await gw.admin('PUT', '/gateway/admin/routes/bad', { uri: '/x', upstream: up(), plugins: { 'hmac-auth': { clock_skew: 0 } } });
    assert.equal(z.status, 400);
  });
});

describe('hmac-auth on a route', () => {
  before(async () => {
    await put(gw, 'consumers', { username: 'jack', plugins: { 'hmac-auth': { key_id: 'ak', secret_key: 'sk-secret' } } });
    await put(gw, 'routes/hm', { uri: '/hm*', upstream: up(), plugins: { 'hmac-auth': {} } });
  });

  it('no Authorization, or not a Signature: 401 saying why, with the realm', async () => {
    const r = await untilRouted(gw, '/hm', (x) => x.status === 401);
    assert.equal(r.body, '{"message":"client request can\'t be validated: missing Authorization header"}\n');
    assert.equal(r.headers['www-authenticate'], 'hmac realm="hmac"');
    const basic = await proxy(gw, '/hm', { headers: { Authorization: 'Basic eDp5' } });
    assert.equal(basic.body, '{"message":"client request can\'t be validated: Authorization header does not start with \'Signature\'"}\n');
  });

  it('a good signature passes, the consumer reaches the upstream', async () => {
    const r = await proxy(gw, '/hm', { headers: signed({ extra: { 'X-Custom': 'a$%b' } }) });
    assert.equal(r.status, 200, r.body);
    assert.equal(r.echo!.headers['x-consumer-username'], 'jack');
    assert.ok(String(r.echo!.headers.authorization).startsWith('Signature '));
    for (const algorithm of ['hmac-sha1', 'hmac-sha512']) {
      assert.equal((await proxy(gw, '/hm', { headers: signed({ algorithm }) })).status, 200, algorithm);
    }
    // the request target is the request's URI with its arguments
    assert.equal((await proxy(gw, '/hm/x?a=1', { headers: signed({ target: '/hm/x?a=1' }) })).status, 200);
  });

  it('every other failure is told only that the request can\'t be validated', async () => {
    const bad: Array<Record<string, string>> = [
      signed({ secret: 'wrong' }),
      signed({ keyId: 'nobody' }),
      signed({ algorithm: 'hmac-sha384' }),
      signed({ date: new Date(Date.now() - 3600_000) }),
      signed({ target: '/other' }),
      // date is in the route's default signed_headers
      signed({ signed: ['@request-target'] }),
      { Authorization: 'Signature keyId="ak",signature="abc"', Date: new Date().toUTCString() },
      { ...signed(), Date: 'yesterday' },
    ];
    for (const headers of bad) {
      const r = await proxy(gw, '/hm', { headers });
      assert.equal(r.status, 401, JSON.stringify(headers));
      assert.equal(r.body, VAGUE);
    }
    const noDate = signed({ signed: ['@request-target'] });
    delete noDate.Date;
    assert.equal((await proxy(gw, '/hm', { headers: noDate })).body, VAGUE);
  });

  it('signed_headers must all be signed; an empty list lets @request-target alone do', async () => {
    await put(gw, 'routes/hm', { uri: '/hm*', upstream: up(), plugins: { 'hmac-auth': { signed_headers: ['x-a', 'date'] } } });
    const r = await untilRouted(gw, '/hm', (x) => x.status === 401, { headers: signed() });
    assert.equal(r.body, VAGUE);
    assert.equal((await proxy(gw, '/hm', { headers: signed({ extra: { 'x-a': '1' } }) })).status, 200);
    await put(gw, 'routes/hm', { uri: '/hm*', upstream: up(), plugins: { 'hmac-auth': { signed_headers: [] } } });
    await untilRouted(gw, '/hm', (x) => x.status === 200, { headers: signed({ signed: ['@request-target'] }) });
  });

  it('validate_request_body: the Digest must be the body\'s; over max_req_body_size is 413', async () => {
    await put(gw, 'routes/hm', { uri: '/hm*', upstream: up(), plugins: { 'hmac-auth': { validate_request_body: true, max_req_body_size: 16 } } });
    const body = '{"a":1}';
    // a request without a Digest is refused once the route changed
    await untilRouted(gw, '/hm', (x) => x.status === 401, { headers: signed() });
    const ok = await proxy(gw, '/hm', { method: 'POST', headers: signed({ method: 'POST', body }), body });
    assert.equal(ok.status, 200);
    assert.equal(ok.echo!.body, body);
    const wrong = await proxy(gw, '/hm', { method: 'POST', headers: signed({ method: 'POST', body }), body: '{"a":2}' });
    assert.equal(wrong.body, VAGUE);
    const noDigest = signed({ method: 'POST' });
    assert.equal((await proxy(gw, '/hm', { method: 'POST', headers: noDigest, body })).body, VAGUE);
    const big = 'x'.repeat(20);
    const large = await proxy(gw, '/hm', { method: 'POST', headers: signed({ method: 'POST', body: big }), body: big });
    assert.equal(large.status, 413);
    assert.equal(large.body, '{"message":"request size 20 is greater than the maximum size 16 allowed"}\n');
  });

  it('hide_credentials keeps the Authorization header from the upstream; realm and anonymous_consumer', async () => {
    await put(gw, 'routes/hm', { uri: '/hm*', upstream: up(), plugins: { 'hmac-auth': { hide_credentials: true } } });
    const r = await untilRouted(gw, '/hm', (x) => x.status === 200 && x.echo!.headers.authorization === undefined, { headers: signed() });
    assert.equal(r.echo!.headers['x-consumer-username'], 'jack');
    await put(gw, 'consumers', { username: 'guest' });
    await put(gw, 'routes/hm', { uri: '/hm*', upstream: up(), plugins: { 'hmac-auth': { anonymous_consumer: 'guest', realm: 'mine' } } });
    const anon = await untilRouted(gw, '/hm', (x) => x.status === 200);
    assert.equal(anon.echo!.headers['x-consumer-username'], 'guest');
    await put(gw, 'routes/hm', { uri: '/hm*', upstream: up(), plugins: { 'hmac-auth': { realm: 'mine' } } });
    const no = await untilRouted(gw, '/hm', (x) => x.status === 401);
    assert.equal(no.headers['www-authenticate'], 'hmac realm="mine"');
  });
});

/**
 * jwt-auth on the gateway's request path against a loopback origin, with
 * tokens this test signs itself (node:crypto): where the token may come
 * from, what each refusal says, hide_credentials, the algorithms and the
 * time claims; and the Admin API's consumer checks (t/plugin/jwt-auth*.t,
 * restated in our own cases).
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
const now = () => Math.floor(Date.now() / 1000);
const b64u = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

/** A compact JWS over `payload`, signed for `alg` with an HMAC secret or a private key. */
function sign(alg: string, key: string | Buffer | crypto.KeyObject, payload: Record<string, unknown>, header: Record<string, unknown> = { typ: 'JWT', alg }): string {
  const input = `${b64u(header)}.${b64u(payload)}`;
  let sig: Buffer;
  if (alg.startsWith('HS')) sig = crypto.createHmac(`sha${alg.slice(2)}`, key as string | Buffer).update(input).digest();
  else if (alg === 'EdDSA') sig = crypto.sign(null, Buffer.from(input), key as crypto.KeyObject);
  else {
    const hash = `sha${alg.slice(2)}`;
    const k = key as crypto.KeyObject;
    if (alg.startsWith('ES')) sig = crypto.sign(hash, Buffer.from(input), { key: k, dsaEncoding: 'ieee-p1363' });
    else if (alg.startsWith('PS')) sig = crypto.sign(hash, Buffer.from(input), { key: k, padding: crypto.constants.RSA_PKCS1_PSS_PADDING });
    else sig = crypto.sign(hash, Buffer.from(input), k);
  }
  return `${input}.${sig.toString('base64url')}`;
}

const pem = (k: crypto.KeyObject) => k.export({ type: 'spki', format: 'pem' }) as string;

describe('jwt-auth: the Admin API checks consumer confs as APISIX does', () => {
  const refused = async (conf: Record<string, unknown>) => {
    const r = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'bad', plugins: { 'jwt-auth': conf } });
    assert.equal(r.status, 400);
    return (r.json as { error_msg: string }).error_msg;
  };
  const prefix = 'invalid plugins configuration: failed to check the configuration of plugin jwt-auth err: ';

  it('an HS algorithm needs a secret; the key is a string; base64_secret wants base64', async () => {
    assert.equal(await refused({ key: 'k' }), `${prefix}property "secret" is required when using HS based algorithms`);
    assert.equal(await refused({ key: 'k', algorithm: 'HS512' }), `${prefix}property "secret" is required when using HS based algorithms`);
    assert.equal(await refused({ key: 7, secret: 's' }), `${prefix}property "key" validation failed: wrong type: expected string, got number`);
    assert.equal(await refused({ key: 'k', secret: '{^c0j4&]2!=J=', base64_secret: true }), `${prefix}base64_secret required but the secret is not in base64 format`);
  });

  it('an asymmetric algorithm needs a public_key', async () => {
    for (const algorithm of ['RS256', 'ES256', 'EdDSA']) {
      assert.equal(await refused({ key: 'k', algorithm }), `${prefix}failed to validate dependent schema for "algorithm": value should match only one schema, but matches none`);
    }
  });

  it('the secret is stored encrypted, and a key belongs to one consumer', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'enc', plugins: { 'jwt-auth': { key: 'enc-key', secret: 'plain-secret' } } });
    assert.equal(r.status, 201);
    const sent = (r.json as { value: { plugins: Record<string, Record<string, string>> } }).value.plugins['jwt-auth'];
    assert.notEqual(sent.secret, 'plain-secret');
    const got = await gw.admin('GET', '/gateway/admin/consumers/enc');
    assert.equal((got.json as { value: { plugins: Record<string, Record<string, string>> } }).value.plugins['jwt-auth'].secret, 'plain-secret');
    const dup = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'enc2', plugins: { 'jwt-auth': { key: 'enc-key', secret: 's' } } });
    assert.deepEqual(dup.json, { error_msg: 'duplicate key of plugin jwt-auth found with consumer: enc' });
  });

  it('the consumer schema carries the secret as an encrypted field', async () => {
    const r = await gw.admin('GET', '/gateway/admin/plugins/jwt-auth?schema_type=consumer');
    assert.equal(r.status, 200);
    const s = r.json as { encrypt_fields: string[]; required: string[] };
    assert.deepEqual(s.encrypt_fields, ['secret']);
    assert.deepEqual(s.required, ['key']);
  });
});

describe('jwt-auth with an HS256 consumer', () => {
  before(async () => {
    await put(gw, 'consumers', { username: 'jack', plugins: { 'jwt-auth': { key: 'user-key', secret: 'my-secret-key' } } });
    await put(gw, 'routes/jwt', { uri: '/jwt*', upstream: up(), plugins: { 'jwt-auth': {} } });
  });
  const good = () => sign('HS256', 'my-secret-key', { key: 'user-key', exp: now() + 600 });
  const refusal = async (headers: Record<string, string>, path = '/jwt') => {
    const r = await proxy(gw, path, { headers });
    assert.equal(r.status, 401);
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="jwt"');
    return r.body;
  };

  it('no token: 401 Missing JWT token, with the realm', async () => {
    const r = await untilRouted(gw, '/jwt', (x) => x.status === 401);
    assert.equal(r.body, '{"message":"Missing JWT token in request"}\n');
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="jwt"');
  });

  it('a token in the header, with or without Bearer, in the query, in the cookie', async () => {
    const t = good();
    for (const headers of [{ Authorization: `Bearer ${t}` } as Record<string, string>, { Authorization: `bearer ${t}` }, { Authorization: t }, { Cookie: `a=1; jwt=${t}` }]) {
      const r = await proxy(gw, '/jwt', { headers });
      assert.equal(r.status, 200, JSON.stringify(headers));
      assert.equal(r.echo!.headers['x-consumer-username'], 'jack');
    }
    assert.equal((await proxy(gw, `/jwt?jwt=${t}`)).status, 200);
    // not hidden by default
    assert.equal((await proxy(gw, '/jwt', { headers: { Authorization: t } })).echo!.headers.authorization, t);
  });

  it('what each bad token is told', async () => {
    assert.equal(await refusal({ Authorization: 'Bearer not-a-jwt' }), '{"message":"JWT token invalid"}\n');
    assert.equal(await refusal({ Authorization: `${b64u({ alg: 'HS256' })}.bm90IGpzb24.sig` }), '{"message":"JWT token invalid"}\n');
    assert.equal(await refusal({ Authorization: sign('HS256', 'my-secret-key', { sub: 'x' }) }), '{"message":"missing user key in JWT token"}\n');
    assert.equal(await refusal({ Authorization: sign('HS256', 'my-secret-key', { key: 'nobody' }) }), '{"message":"Invalid user key in JWT token"}\n');
    const failed = '{"message":"failed to verify jwt"}\n';
    assert.equal(await refusal({ Authorization: sign('HS256', 'other-secret', { key: 'user-key' }) }), failed);
    // the token's alg must be the consumer's algorithm, even when the signature would do
    assert.equal(await refusal({ Authorization: sign('HS512', 'my-secret-key', { key: 'user-key' }) }), failed);
    assert.equal(await refusal({ Authorization: sign('HS256', 'my-secret-key', { key: 'user-key', exp: now() - 10 }) }), failed);
    assert.equal(await refusal({ Authorization: sign('HS256', 'my-secret-key', { key: 'user-key', nbf: now() + 100 }) }), failed);
    assert.equal(await refusal({ Authorization: sign('HS256', 'my-secret-key', { key: 'user-key', exp: 'tomorrow' }) }), failed);
    // a token without time claims passes when claims_to_verify is not set
    assert.equal((await proxy(gw, '/jwt', { headers: { Authorization: sign('HS256', 'my-secret-key', { key: 'user-key' }) } })).status, 200);
  });

  it('claims_to_verify makes the listed claims required', async () => {
    await put(gw, 'routes/jwt', { uri: '/jwt*', upstream: up(), plugins: { 'jwt-auth': { claims_to_verify: ['exp'] } } });
    const noExp = sign('HS256', 'my-secret-key', { key: 'user-key' });
    const r = await untilRouted(gw, '/jwt', (x) => x.status === 401, { headers: { Authorization: noExp } });
    assert.equal(r.body, '{"message":"failed to verify jwt"}\n');
    assert.equal((await proxy(gw, '/jwt', { headers: { Authorization: good() } })).status, 200);
  });

  it('hide_credentials keeps the header, the argument or the cookie from the upstream', async () => {
    await put(gw, 'routes/jwt', { uri: '/jwt*', upstream: up(), plugins: { 'jwt-auth': { hide_credentials: true } } });
    const t = good();
    const h = await untilRouted(gw, '/jwt', (x) => x.status === 200 && x.echo!.headers.authorization === undefined, { headers: { Authorization: `Bearer ${t}`, 'X-Other': '1' } });
    assert.equal(h.echo!.headers['x-other'], '1');
    const q = await proxy(gw, `/jwt/q?a=1&jwt=${t}&b=2`);
    assert.equal(q.status, 200);
    assert.equal(q.echo!.url, '/jwt/q?a=1&b=2');
    const c = await proxy(gw, '/jwt', { headers: { Cookie: `a=1; jwt=${t}; b=2` } });
    assert.equal(c.status, 200);
    assert.equal(c.echo!.headers.cookie, 'a=1; b=2');
  });

  it('header, query, cookie and realm are the route\'s to name', async () => {
    await put(gw, 'routes/jwt', { uri: '/jwt*', upstream: up(), plugins: { 'jwt-auth': { header: 'X-Token', query: 'tok', cookie: 'sess', realm: 'mine' } } });
    const t = good();
    const r = await untilRouted(gw, '/jwt', (x) => x.status === 200, { headers: { 'X-Token': t } });
    assert.equal(r.echo!.headers['x-consumer-username'], 'jack');
    assert.equal((await proxy(gw, `/jwt?tok=${t}`)).status, 200);
    assert.equal((await proxy(gw, '/jwt', { headers: { Cookie: `sess=${t}` } })).status, 200);
    const no = await proxy(gw, '/jwt', { headers: { Authorization: t } });
    assert.equal(no.status, 401);
    assert.equal(no.headers['www-authenticate'], 'Bearer realm="mine"');
  });

  it('anonymous_consumer stands in for a bad token; an unknown one is 401 Invalid user authorization', async () => {
    await put(gw, 'consumers', { username: 'guest' });
    await put(gw, 'routes/jwt', { uri: '/jwt*', upstream: up(), plugins: { 'jwt-auth': { anonymous_consumer: 'guest' } } });
    const r = await untilRouted(gw, '/jwt', (x) => x.status === 200);
    assert.equal(r.echo!.headers['x-consumer-username'], 'guest');
    await put(gw, 'routes/jwt', { uri: '/jwt*', upstream: up(), plugins: { 'jwt-auth': { anonymous_consumer: 'ghost' } } });
    const no = await untilRouted(gw, '/jwt', (x) => x.status === 401);
    assert.equal(no.body, '{"message":"Invalid user authorization"}\n');
  });
});

describe('jwt-auth with other algorithms, credentials and key claims', () => {
  it('a base64 secret, a lifetime grace period and key_claim_name, on a credential', async () => {
    const raw = crypto.randomBytes(32);
    await put(gw, 'consumers', { username: 'rose' });
    await put(gw, 'consumers/rose/credentials/c1', { plugins: { 'jwt-auth': { key: 'rose-key', secret: raw.toString('base64'), base64_secret: true, lifetime_grace_period: 60 } } });
    await put(gw, 'routes/jwt2', { uri: '/jwt2', upstream: up(), plugins: { 'jwt-auth': { key_claim_name: 'iss' } } });
    const t = sign('HS256', raw, { iss: 'rose-key', exp: now() - 5 });
    const r = await untilRouted(gw, '/jwt2', (x) => x.status === 200, { headers: { Authorization: t } });
    assert.equal(r.echo!.headers['x-consumer-username'], 'rose');
    assert.equal(r.echo!.headers['x-credential-identifier'], 'c1');
    const late = await proxy(gw, '/jwt2', { headers: { Authorization: sign('HS256', raw, { iss: 'rose-key', exp: now() - 120 }) } });
    assert.equal(late.status, 401);
    // the base64 text itself is not the secret
    assert.equal((await proxy(gw, '/jwt2', { headers: { Authorization: sign('HS256', raw.toString('base64'), { iss: 'rose-key' }) } })).status, 401);
  });

  it('RS256, PS256, ES256 and EdDSA verify with the consumer\'s public key', async () => {
    const pairs = {
      RS256: crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }),
      PS256: crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }),
      ES256: crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }),
      EdDSA: crypto.generateKeyPairSync('ed25519'),
    };
    for (const [alg, pair] of Object.entries(pairs)) {
      const name = `u${alg.toLowerCase()}`;
      await put(gw, 'consumers', { username: name, plugins: { 'jwt-auth': { key: `${name}-key`, algorithm: alg, public_key: pem(pair.publicKey) } } });
    }
    await put(gw, 'routes/jwt3', { uri: '/jwt3', upstream: up(), plugins: { 'jwt-auth': {} } });
    for (const [alg, pair] of Object.entries(pairs)) {
      const name = `u${alg.toLowerCase()}`;
      const r = await untilRouted(gw, '/jwt3', (x) => x.status === 200, { headers: { Authorization: sign(alg, pair.privateKey, { key: `${name}-key` }) } });
      assert.equal(r.echo!.headers['x-consumer-username'], name);
      const other = alg.startsWith('RS') || alg.startsWith('PS') ? pairs.ES256.privateKey : pairs.RS256.privateKey;
      let forged: string;
      try { forged = sign(alg, other, { key: `${name}-key` }); } catch { forged = sign(alg, crypto.generateKeyPairSync('ed25519').privateKey, { key: `${name}-key` }); }
      assert.equal((await proxy(gw, '/jwt3', { headers: { Authorization: forged } })).status, 401, alg);
    }
    // an HS256 token made with the public key as its secret is refused (alg must match)
    const conf = pem(pairs.RS256.publicKey);
    const r = await proxy(gw, '/jwt3', { headers: { Authorization: sign('HS256', conf, { key: 'urs256-key' }) } });
    assert.equal(r.status, 401);
    assert.equal(r.body, '{"message":"failed to verify jwt"}\n');
  });
});

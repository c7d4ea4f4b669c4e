/**
 * csrf on the gateway's request path: the token a response sets in its
 * cookie, checked when an unsafe method sends it back in the header, with
 * APISIX's 401 answers (apisix/plugins/csrf.lua), restated in our own cases.
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

const NAME = 'apisix-csrf-token';
const route = (conf: Record<string, unknown>) => ({ uri: '/csrf', plugins: { csrf: conf }, upstream: { type: 'roundrobin', nodes: { [o.node]: 1 } } });

/** A token as APISIX makes it, signed with `key`. */
function token(key: string, random: number, expires: number): string {
  const sign = crypto.createHash('sha256').update(`{expires:${expires},random:${random},key:${key}}`).digest('hex');
  return Buffer.from(JSON.stringify({ random, expires, sign })).toString('base64');
}

const post = (value: string | undefined, cookie: string | undefined) => proxy(gw, '/csrf', {
  method: 'POST', body: 'x', headers: { ...(value !== undefined ? { [NAME]: value } : {}), ...(cookie !== undefined ? { Cookie: `${NAME}=${cookie}` } : {}) },
});

describe('csrf', () => {
  it('a GET passes and sets a signed token in the cookie; a POST sending it back passes', async () => {
    await put(gw, 'routes/csrf', route({ key: 'userkey', expires: 100 }));
    const r = await untilRouted(gw, '/csrf', (x) => x.headers['set-cookie'] !== undefined);
    assert.equal(r.status, 200);
    const cookie = r.headers['set-cookie']![0];
    const m = new RegExp(`^${NAME}=([A-Za-z0-9+/=]+);path=/;SameSite=Lax;Expires=(.+)$`).exec(cookie);
    assert.ok(m, cookie);
    const expiresAt = Date.parse(m[2].replace(/-/g, ' '));
    assert.ok(Math.abs(expiresAt - (Date.now() + 100_000)) < 5_000, m[2]);
    const t = JSON.parse(Buffer.from(m[1], 'base64').toString()) as { random: number; expires: number; sign: string };
    assert.equal(m[1], token('userkey', t.random, t.expires), 'the token is APISIX\'s: its sign is over {expires,random,key}');
    const ok = await post(m[1], m[1]);
    assert.equal(ok.status, 200);
    assert.equal(ok.echo?.method, 'POST');
  });

  it('an unsafe method without the header, without the cookie, or with two tokens that differ: 401', async () => {
    const good = token('userkey', 0.5, Math.floor(Date.now() / 1000));
    for (const [value, cookie, message] of [
      [undefined, good, 'no csrf token in headers'],
      ['', good, 'no csrf token in headers'],
      [good, undefined, 'no csrf cookie'],
      [good, token('userkey', 0.25, Math.floor(Date.now() / 1000)), 'csrf token mismatch'],
    ] as Array<[string | undefined, string | undefined, string]>) {
      const r = await post(value, cookie);
      assert.equal(r.status, 401, message);
      assert.deepEqual(JSON.parse(r.body), { error_msg: message });
    }
    assert.equal((await post(good, good)).status, 200);
  });

  it('a token signed with another key, expired, or not a token: 401 Failed to verify', async () => {
    const now = Math.floor(Date.now() / 1000);
    for (const bad of [token('otherkey', 0.5, now), token('userkey', 0.5, now - 101), Buffer.from('{"random":1}').toString('base64'), '!!!']) {
      const r = await post(bad, bad);
      assert.equal(r.status, 401, bad);
      assert.deepEqual(JSON.parse(r.body), { error_msg: 'Failed to verify the csrf token signature' });
    }
  });

  it('expires 0: a token never expires', async () => {
    await put(gw, 'routes/csrf', route({ key: 'userkey', expires: 0 }));
    const old = token('userkey', 0.125, 1_000_000);
    await untilRouted(gw, '/csrf', (x) => x.status === 200, { method: 'POST', body: 'x', headers: { [NAME]: old, Cookie: `${NAME}=${old}` } });
  });
});

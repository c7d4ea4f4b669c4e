/**
 * `$env://` and `$secret://` references in an SSL object's cert/key
 * (certs/keys, client.ca): the Admin API takes them without reading them
 * as PEM (a pair is not checked when either side is a reference, as
 * APISIX's check_ssl_conf), and the gateway resolves `$env://` from its
 * environment when it serves the certificate; one that does not resolve
 * is logged and its SNI is not served.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { freePorts } from '../kit/server.ts';
import { defaultYaml, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { put, startOrigin } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';
import { fingerprintOf, handshake, TestCa } from './tls-kit.ts';
import type { Handshake } from './tls-kit.ts';

const ca = new TestCa();
const direct = ca.issue(['env.test']);
const viaJson = ca.issue(['json.test'], { ec: true });
let gw: Gateway;
let origin: Origin;
let sslPort: number;

before(async () => {
  [sslPort] = await freePorts(1);
  const yaml = defaultYaml(2).replace('nginx_config:', ['  ssl:', '    listen:', '      - ip: 127.0.0.1', `        port: ${sslPort}`, 'nginx_config:'].join('\n'))
    // workers keep only the variables nginx_config.envs names (nginx's `env`)
    .replace('nginx_config:\n', 'nginx_config:\n  envs: [GH_REF_CERT, GH_REF_KEY, GH_REF_PAIR]\n');
  const env = {
    GH_REF_CERT: direct.cert, GH_REF_KEY: direct.key,
    GH_REF_PAIR: JSON.stringify({ crt: viaJson.cert, pkey: viaJson.key }),
  };
  [gw, origin] = await Promise.all([startGateway({ yaml, env }), startOrigin()]);
  await put(gw, 'routes/all', { uri: '/*', upstream: { type: 'roundrobin', nodes: { [origin.node]: 1 } } });
});
after(async () => { await Promise.all([gw.stop(), origin.close()]); });

const errorLog = (): string => fs.readFileSync(path.join(gw.prefix, 'logs', 'error.log'), 'utf8');
const get = (host: string) => `GET /hello HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`;

/** Handshakes until `ok` holds (both workers have the change), then 6 more that must hold too. */
async function until(sni: string, ok: (h: Handshake) => boolean): Promise<Handshake> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const h = await handshake(sslPort, sni, { request: get(sni) });
    if (ok(h)) break;
    if (Date.now() > deadline) throw new Error(`handshake for ${sni}: ${JSON.stringify(h)}`);
    await sleep(10);
  }
  let last: Handshake | undefined;
  for (let i = 0; i < 6; i++) {
    last = await handshake(sslPort, sni, { request: get(sni) });
    assert.ok(ok(last), `${sni}: ${JSON.stringify(last)}`);
  }
  return last!;
}

async function logged(text: string): Promise<void> {
  for (let i = 0; i < 200 && !errorLog().includes(text); i++) await sleep(20);
  assert.ok(errorLog().includes(text), `error.log lacks ${text}`);
}

describe('Admin API: references in cert and key', () => {
  it('takes $env:// (any case of the prefix) and $secret:// references as given, the key hidden', async () => {
    const body = {
      sni: 'refs.test', cert: '$ENV://GH_REF_CERT', key: '$env://GH_REF_KEY',
      certs: ['$env://GH_REF_CERTS'], keys: ['$ENV://GH_REF_KEYS'],
    };
    const r = await gw.admin('PUT', '/gateway/admin/ssls/refs', body);
    assert.equal(r.status, 201, r.text);
    const g = await gw.admin('GET', '/gateway/admin/ssls/refs');
    const v = (g.json as { value: Record<string, unknown> }).value;
    assert.equal(v.cert, '$ENV://GH_REF_CERT');
    assert.deepEqual(v.certs, ['$env://GH_REF_CERTS']);
    assert.equal(v.key, undefined);
    const s = await gw.admin('PUT', '/gateway/admin/ssls/vault', { sni: 'vault.test', cert: '$secret://vault/1/ssl/crt', key: '$secret://vault/1/ssl/key' });
    assert.equal(s.status, 201, s.text);
  });

  it('does not check a pair one side of which is a reference', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/ssls/half', { sni: 'half.test', cert: '$env://GH_REF_CERT', key: 'k'.repeat(64) });
    assert.equal(r.status, 201, r.text);
  });

  it('refuses what is neither PEM nor a reference, and keeps nothing', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ sni: 'bad.test', cert: '$ENV://GH_REF_CERT', key: '$env://GH_REF_KEY', certs: ['https://GH_REF_CERTS'], keys: ['$env://GH_REF_KEYS'] },
        'invalid configuration: property "certs" validation failed: failed to validate item 1: string too short, expected at least 128, got 20'],
      // `$secret://` is case-sensitive in APISIX (only `$env://` is upper-cased)
      [{ sni: 'bad.test', cert: '$SECRET://vault/1/ssl/crt', key: '$env://GH_REF_KEY' },
        'invalid configuration: property "cert" validation failed: string too short, expected at least 128, got 25'],
      [{ sni: 'bad.test', cert: direct.cert, key: 'k'.repeat(64) }, 'failed to parse key: PEM_read_bio_PrivateKey() failed'],
    ];
    for (const [body, msg] of cases) {
      const r = await gw.admin('PUT', '/gateway/admin/ssls/bad', body);
      assert.equal(r.status, 400, r.text);
      assert.deepEqual(r.json, { error_msg: msg });
    }
    assert.equal((await gw.admin('GET', '/gateway/admin/ssls/bad')).status, 404);
  });
});

describe('data plane: references resolved when the certificate is served', () => {
  it('serves a cert and key read from the environment', async () => {
    await put(gw, 'ssls/env', { sni: 'env.test', cert: '$env://GH_REF_CERT', key: '$ENV://GH_REF_KEY' });
    const h = await until('env.test', (x) => x.fingerprint === fingerprintOf(direct.cert));
    assert.match(h.response ?? '', /^HTTP\/1\.1 200 /);
    assert.equal(h.cn, 'env.test');
  });

  it('reads a field of a JSON environment variable ($env://NAME/field)', async () => {
    await put(gw, 'ssls/json', { sni: 'json.test', cert: '$env://GH_REF_PAIR/crt', key: '$env://GH_REF_PAIR/pkey' });
    const h = await until('json.test', (x) => x.fingerprint === fingerprintOf(viaJson.cert));
    assert.match(h.response ?? '', /^HTTP\/1\.1 200 /);
  });

  it('does not serve an SNI whose reference does not resolve, and logs why', async () => {
    await put(gw, 'ssls/missing', { sni: 'missing.test', cert: '$env://GH_REF_NOT_SET', key: '$env://GH_REF_KEY' });
    await until('missing.test', (x) => x.error !== undefined && x.fingerprint === undefined);
    await logged('failed to resolve secret reference: $env://GH_REF_NOT_SET, field: cert, err: no value');
    await until('vault.test', (x) => x.error !== undefined && x.fingerprint === undefined);
    await logged('failed to resolve secret reference: $secret://vault/1/ssl/crt, field: cert, err: no secret manager: vault');
  });
});

/**
 * Certificates by SNI on the gateway's `apisix.ssl.listen` port, with two
 * workers and changes through the Admin API (no reload): exact beats
 * `*.` (one label), the newest valid certificate wins, RSA and ECDSA side
 * by side, fallback_sni, no match fails the handshake (APISIX's log line),
 * `type: client` objects are not served; mTLS refused in the handshake, or
 * per URI with skip_mtls_uri_regex (400), and a Host whose SSL object
 * verifies clients must be the SNI (as t/router/radixtree-sni*.t,
 * t/node/client-mtls.t).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
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
import type { Handshake, Pem } from './tls-kit.ts';

let gw: Gateway;
let origin: Origin;
let sslPort: number;
const ca = new TestCa();
const otherCa = new TestCa('Other CA');

before(async () => {
  [sslPort] = await freePorts(1);
  const yaml = defaultYaml(2).replace('nginx_config:', [
    '  ssl:',
    '    listen:',
    '      - ip: 127.0.0.1',
    `        port: ${sslPort}`,
    '    fallback_sni: fallback.test',
    'nginx_config:',
  ].join('\n'));
  [gw, origin] = await Promise.all([startGateway({ yaml }), startOrigin()]);
  await put(gw, 'routes/all', { uri: '/*', upstream: { type: 'roundrobin', nodes: { [origin.node]: 1 } } });
});
after(async () => { await Promise.all([gw.stop(), origin.close()]); });

/** Handshakes until `ok` holds (the change reached the workers), then 8 more on new connections that must all hold. */
async function until(sni: string | undefined, ok: (h: Handshake) => boolean, opts: Parameters<typeof handshake>[2] = {}): Promise<Handshake> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const h = await handshake(sslPort, sni, opts);
    if (ok(h)) break;
    if (Date.now() > deadline) throw new Error(`handshake for ${sni}: ${JSON.stringify(h)}`);
    await sleep(10);
  }
  let last: Handshake | undefined;
  for (let i = 0; i < 8; i++) {
    last = await handshake(sslPort, sni, opts);
    assert.ok(ok(last), `${sni}: ${JSON.stringify(last)}`);
  }
  return last!;
}

const serves = (pem: Pem) => (h: Handshake) => h.fingerprint === fingerprintOf(pem.cert);
const refused = (h: Handshake) => h.error !== undefined && h.fingerprint === undefined;
const get = (path: string, host: string) => `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`;
const statusOf = (h: Handshake) => Number(/^HTTP\/1\.1 (\d+)/.exec(h.response ?? '')?.[1] ?? 0);

/** `openssl s_client` to the TLS port with `input` on its stdin: what it printed. */
function opensslClient(args: string[], input: string): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn('openssl', ['s_client', '-connect', `127.0.0.1:${sslPort}`, ...args], { stdio: ['pipe', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
    child.on('close', () => resolve(out));
    child.stdin.end(input);
  });
}

function errorLog(): string {
  return fs.readFileSync(path.join(gw.prefix, 'logs', 'error.log'), 'utf8');
}

describe('certificates by SNI', () => {
  const wild = ca.issue(['*.wild.test']);
  const exact = ca.issue(['exact.wild.test']);

  it('an exact name beats a wildcard, which matches one label only; the certificate verifies with openssl', async () => {
    await put(gw, 'ssls/w', { sni: '*.wild.test', cert: wild.cert, key: wild.key });
    await put(gw, 'ssls/e', { snis: ['exact.wild.test', 'other.test'], cert: exact.cert, key: exact.key });
    await until('exact.wild.test', serves(exact));
    await until('a.wild.test', serves(wild));
    await until('other.test', serves(exact));
    assert.ok(refused(await handshake(sslPort, 'x.a.wild.test')));
    assert.ok(refused(await handshake(sslPort, 'wild.test')));
    const s = spawnSync('openssl', ['s_client', '-connect', `127.0.0.1:${sslPort}`, '-servername', 'exact.wild.test',
      '-verify_return_error', '-verify_hostname', 'exact.wild.test', '-CAfile', ca.certFile], { input: '', encoding: 'utf8' });
    assert.equal(s.status, 0, s.stdout + s.stderr);
    assert.match(s.stdout, /Verify return code: 0 \(ok\)/);
    assert.match(s.stdout, /subject=CN\s*=\s*exact\.wild\.test/);
    // served from keys that are stored encrypted: no PEM private key in the store's files
    const dataDir = path.join(gw.prefix, 'data');
    const stored = fs.readdirSync(dataDir).map((f) => fs.readFileSync(path.join(dataDir, f), 'latin1')).join('');
    assert.ok(stored.includes('exact.wild.test'));
    assert.ok(!stored.includes('PRIVATE KEY'));
  });

  it('no matching certificate fails the handshake, with APISIX\'s error line', async () => {
    const h = await handshake(sslPort, 'nomatch.test');
    assert.ok(refused(h), JSON.stringify(h));
    const s = spawnSync('openssl', ['s_client', '-connect', `127.0.0.1:${sslPort}`, '-servername', 'nomatch.test'], { input: '', encoding: 'utf8' });
    assert.notEqual(s.status, 0);
    for (let i = 0; i < 100 && !errorLog().includes('failed to find any SSL certificate by SNI: nomatch.test'); i++) await sleep(20);
    assert.match(errorLog(), /\[error\].*failed to find any SSL certificate by SNI: nomatch\.test while SSL handshaking/);
  });

  it('a replaced certificate is served from the next handshake in every worker; a deleted one at once no more', async () => {
    const renewed = ca.issue(['exact.wild.test']);
    await put(gw, 'ssls/e', { snis: ['exact.wild.test', 'other.test'], cert: renewed.cert, key: renewed.key });
    await until('exact.wild.test', serves(renewed));
    assert.equal((await gw.admin('DELETE', '/gateway/admin/ssls/e')).status, 200);
    // the wildcard takes the name over; other.test has no certificate left
    await until('exact.wild.test', serves(wild));
    await until('other.test', refused);
  });

  it('of two objects with the same name the newest valid one is served', async () => {
    const first = ca.issue(['dup.test']);
    const expired = ca.issue(['dup.test'], { days: -1 });
    const newest = ca.issue(['dup.test']);
    await put(gw, 'ssls/d1', { sni: 'dup.test', cert: first.cert, key: first.key });
    await until('dup.test', serves(first));
    await put(gw, 'ssls/d2', { sni: 'dup.test', cert: expired.cert, key: expired.key });
    await put(gw, 'ssls/marker', { sni: 'marker.test', cert: first.cert, key: first.key });
    await until('marker.test', serves(first));
    await until('dup.test', serves(first));
    await put(gw, 'ssls/d3', { sni: 'dup.test', cert: newest.cert, key: newest.key });
    await until('dup.test', serves(newest));
    await put(gw, 'ssls/d1', { sni: 'dup.test', cert: first.cert, key: first.key });
    await until('dup.test', serves(first));
  });

  it('serves RSA and ECDSA certificates side by side (cert/key and certs/keys)', async () => {
    const rsa = ca.issue(['both.test']);
    const ec = ca.issue(['both.test'], { ec: true });
    await put(gw, 'ssls/both', { sni: 'both.test', cert: rsa.cert, key: rsa.key, certs: [ec.cert], keys: [ec.key] });
    await until('both.test', serves(ec), { sigalgs: 'ECDSA+SHA256' });
    await until('both.test', serves(rsa), { sigalgs: 'RSA-PSS+SHA256:RSA+SHA256' });
  });

  it('a client without SNI gets fallback_sni\'s certificate; type client objects are not served', async () => {
    const fb = ca.issue(['fallback.test']);
    const cl = ca.issue(['client.test'], { client: true });
    await put(gw, 'ssls/fb', { sni: 'fallback.test', cert: fb.cert, key: fb.key });
    await put(gw, 'ssls/cl', { type: 'client', sni: 'client.test', cert: cl.cert, key: cl.key });
    await until(undefined, serves(fb));
    await until('fallback.test', serves(fb));
    assert.ok(refused(await handshake(sslPort, 'client.test')));
  });

  it('ssl_protocols of an object bound the versions', async () => {
    const only13 = ca.issue(['tls13.test']);
    await put(gw, 'ssls/v', { sni: 'tls13.test', cert: only13.cert, key: only13.key, ssl_protocols: ['TLSv1.3'] });
    await until('tls13.test', serves(only13));
    assert.ok(refused(await handshake(sslPort, 'tls13.test', { maxVersion: 'TLSv1.2' })));
  });

  it('proxies HTTP over the TLS port', async () => {
    const h = await handshake(sslPort, 'a.wild.test', { request: get('/over-tls', 'a.wild.test') });
    assert.equal(statusOf(h), 200, h.response);
    assert.match(h.response!, /"url":"\/over-tls"/);
  });
});

describe('client certificates (mTLS)', () => {
  const server = ca.issue(['mtls.test', 'skip.test', 'plain.test']);
  const client = ca.issue(['client one'], { client: true });
  const stranger = otherCa.issue(['stranger'], { client: true });

  before(async () => {
    await put(gw, 'ssls/m', { sni: 'mtls.test', cert: server.cert, key: server.key, client: { ca: ca.cert, depth: 2 } });
    await put(gw, 'ssls/s', {
      sni: 'skip.test', cert: server.cert, key: server.key, client: { ca: ca.cert, skip_mtls_uri_regex: ['/skip[0-9]*'] },
    });
    await put(gw, 'ssls/p', { sni: 'plain.test', cert: server.cert, key: server.key });
    await until('plain.test', serves(server));
    await until('mtls.test', serves(server), { cert: client.cert, key: client.key });
  });

  it('without skip_mtls_uri_regex a client without a valid certificate is refused', async () => {
    const ok = await handshake(sslPort, 'mtls.test', { cert: client.cert, key: client.key, request: get('/m', 'mtls.test') });
    assert.equal(statusOf(ok), 200, ok.response);
    const none = await handshake(sslPort, 'mtls.test', { request: get('/m', 'mtls.test') });
    assert.equal(none.response, undefined, JSON.stringify(none));
    assert.ok(none.error, JSON.stringify(none));
    const wrong = await handshake(sslPort, 'mtls.test', { cert: stranger.cert, key: stranger.key, request: get('/m', 'mtls.test') });
    assert.equal(wrong.response, undefined, JSON.stringify(wrong));
    const s = spawnSync('openssl', ['s_client', '-connect', `127.0.0.1:${sslPort}`, '-servername', 'mtls.test', '-tls1_2'], { input: '', encoding: 'utf8' });
    assert.notEqual(s.status, 0, s.stdout);
    // not spawnSync: the origin answering through the gateway runs in this process
    const withCert = await opensslClient(['-servername', 'mtls.test', '-tls1_2', '-quiet', '-verify_return_error', '-CAfile', ca.certFile,
      '-cert', client.certFile, '-key', client.keyFile], get('/openssl', 'mtls.test'));
    assert.match(withCert, /^HTTP\/1\.1 200 OK\r\n[\s\S]*"url":"\/openssl"/);
  });

  it('with skip_mtls_uri_regex: matching URIs pass without a certificate, others are answered 400', async () => {
    const skipped = await handshake(sslPort, 'skip.test', { request: get('/skip1', 'skip.test') });
    assert.equal(statusOf(skipped), 200, skipped.response);
    const strangerSkipped = await handshake(sslPort, 'skip.test', { cert: stranger.cert, key: stranger.key, request: get('/skip', 'skip.test') });
    assert.equal(statusOf(strangerSkipped), 200, strangerSkipped.response);
    const missing = await handshake(sslPort, 'skip.test', { request: get('/hello', 'skip.test') });
    assert.equal(statusOf(missing), 400, missing.response);
    assert.match(missing.response!, /400 Bad Request/);
    const wrong = await handshake(sslPort, 'skip.test', { cert: stranger.cert, key: stranger.key, request: get('/hello', 'skip.test') });
    assert.equal(statusOf(wrong), 400, wrong.response);
    const good = await handshake(sslPort, 'skip.test', { cert: client.cert, key: client.key, request: get('/hello', 'skip.test') });
    assert.equal(statusOf(good), 200, good.response);
    assert.match(errorLog(), /client certificate was not present/);
    assert.match(errorLog(), /client certificate verification is not passed: FAILED/);
  });

  it('client.depth bounds the chain as OpenSSL\'s verify depth: through an intermediate needs depth 1', async () => {
    const intermediate = new TestCa('Intermediate CA', ca);
    const deep = intermediate.issue(['deep client'], { client: true });
    const chain = deep.cert + intermediate.cert;
    await put(gw, 'ssls/depth', { sni: 'depth.test', cert: server.cert, key: server.key, client: { ca: ca.cert, depth: 0 } });
    // depth 0: a certificate the CA itself issued
    await until('depth.test', (h) => statusOf(h) === 200, { cert: client.cert, key: client.key, request: get('/d', 'depth.test') });
    const refusedDeep = await handshake(sslPort, 'depth.test', { cert: chain, key: deep.key, request: get('/d', 'depth.test') });
    assert.equal(refusedDeep.response, undefined, JSON.stringify(refusedDeep));
    await put(gw, 'ssls/depth', { sni: 'depth.test', cert: server.cert, key: server.key, client: { ca: ca.cert, depth: 1 } });
    await until('depth.test', (h) => statusOf(h) === 200, { cert: chain, key: deep.key, request: get('/d', 'depth.test') });
  });

  it('a Host whose SSL object verifies clients must be the SNI', async () => {
    const h = await handshake(sslPort, 'plain.test', { request: get('/h', 'mtls.test') });
    assert.equal(statusOf(h), 400, h.response);
    assert.match(errorLog(), /client certificate verified with SNI plain\.test, but the host is mtls\.test/);
    const same = await handshake(sslPort, 'plain.test', { request: get('/h', 'plain.test') });
    assert.equal(statusOf(same), 200, same.response);
  });
});

// The gateway's SSL objects that ask for their certificate from an issuer
// (Gatehouse's `acme` field): config.yaml's gatehouse.acme declares the
// issuer, PUT /gateway/admin/ssls/1 names it with the snis and no cert/key,
// pebble validates http-01 on the gateway's proxy port (or tls-alpn-01 on
// its TLS port), and the certificate is written into the SSL object through
// the store and served by every worker on the first handshake after, with
// GET showing the status and never the key.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { freePorts } from '../kit/server.ts';
import { ADMIN_KEY, startGateway } from '../gateway/harness.ts';
import type { Gateway } from '../gateway/harness.ts';
import { etcdSkip, startEtcd } from '../gateway/etcd-kit.ts';
import { pebbleSkip, servedCertificate, startPebble, verifiedPeer, waitFor } from './pebble.ts';
import type { Pebble } from './pebble.ts';

function yaml(pebble: Pebble, httpPort: number, tlsPort: number, challenge = 'http-01', workers = 2, etcd?: string): string {
  return `apisix:
  node_listen:
    - ip: 127.0.0.1
      port: ${httpPort}
  ssl:
    listen:
      - ip: 127.0.0.1
        port: ${tlsPort}
nginx_config:
  worker_processes: ${workers}
  error_log_level: info
deployment:
  admin:
    admin_listen:
      ip: 127.0.0.1
      port: %ADMIN%
    admin_key:
      - name: admin
        key: ${ADMIN_KEY}
        role: admin
${etcd ? `  etcd:\n    host:\n      - ${etcd}\n    timeout: 5\n` : ''}gatehouse:
  acme:
    issuers:
      pebble:
        uri: ${pebble.url}
        ssl_trusted_certificate: ${pebble.trusted}
        contact: admin@example.test
        challenge: ${challenge}
        accept_terms_of_service: true
`;
}

interface SslValue { cert?: string; key?: string; acme?: { issuer: string; status?: Record<string, string> } }

async function sslObject(gw: Gateway, id: string): Promise<SslValue> {
  const r = await gw.admin('GET', `/gateway/admin/ssls/${id}`);
  assert.equal(r.status, 200, r.text);
  return (r.json as { value: SslValue }).value;
}

function opensslConnect(port: number, servername: string, caFile: string): Promise<string> {
  return new Promise((resolve) => {
    const p = execFile('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', servername, '-verify_return_error', '-CAfile', caFile],
      { timeout: 10_000 }, (_err, stdout, stderr) => resolve(stdout + stderr));
    p.stdin?.end();
  });
}

test('an SSL object with acme gets its certificate from pebble by http-01, written through the store, served by every worker', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort] = await freePorts(2);
  const pebble = await startPebble({ httpPort, tlsPort });
  t.after(() => pebble.stop());
  const gw = await startGateway({ yaml: yaml(pebble, httpPort, tlsPort) });
  t.after(() => gw.stop());

  // the schema: without cert/key only with acme, and only an issuer config.yaml declares
  const noCert = await gw.admin('PUT', '/gateway/admin/ssls/9', { snis: ['x.example.test'] });
  assert.equal(noCert.status, 400, noCert.text);
  const unknown = await gw.admin('PUT', '/gateway/admin/ssls/9', { snis: ['x.example.test'], acme: { issuer: 'nope' } });
  assert.equal(unknown.status, 400);
  assert.match(unknown.text, /acme: unknown issuer \\?"nope\\?"/);

  const put = await gw.admin('PUT', '/gateway/admin/ssls/1', { snis: ['shop.example.test', 'www.shop.example.test'], acme: { issuer: 'pebble' } });
  assert.equal(put.status, 201, put.text);

  const root = await pebble.root();
  const peer = await waitFor('the issued certificate', () => verifiedPeer(tlsPort, 'www.shop.example.test', root), 60_000);
  assert.equal(peer.subjectaltname, 'DNS:shop.example.test, DNS:www.shop.example.test');
  assert.match(String(peer.issuer.CN), /^Pebble Intermediate CA/);
  // both workers serve it (each handshake may land on either)
  for (let i = 0; i < 6; i++) assert.equal((await verifiedPeer(tlsPort, 'shop.example.test', root))?.serialNumber, peer.serialNumber, `connection ${i}`);
  const caFile = path.join(gw.prefix, 'pebble-root.pem');
  fs.writeFileSync(caFile, root);
  const out = await opensslConnect(tlsPort, 'shop.example.test', caFile);
  assert.match(out, /Verify return code: 0 \(ok\)/);

  // GET: the certificate and its status, never the key; the store holds the key encrypted
  const value = await waitFor('the valid status', async () => {
    const v = await sslObject(gw, '1');
    return v.acme?.status?.state === 'valid' ? v : undefined;
  });
  assert.equal(value.key, undefined);
  assert.match(value.cert ?? '', /^-----BEGIN CERTIFICATE-----/);
  assert.equal(value.acme?.issuer, 'pebble');
  assert.ok(Date.parse(value.acme!.status!.renew_at) > Date.now());
  assert.ok(Date.parse(value.acme!.status!.not_after) > Date.parse(value.acme!.status!.renew_at));

  // a PUT of the same object without its certificate gets it back from state_path, without a new order
  const issued = () => (pebble.log().match(/Issued certificate serial/g) ?? []).length;
  assert.equal(issued(), 1);
  const again = await gw.admin('PUT', '/gateway/admin/ssls/1', { snis: ['shop.example.test', 'www.shop.example.test'], acme: { issuer: 'pebble' }, labels: { team: 'shop' } });
  assert.equal(again.status, 200, again.text);
  const back = await waitFor('the certificate written back', async () => {
    const v = await sslObject(gw, '1');
    return v.cert === value.cert && v.acme?.status?.state === 'valid' ? v : undefined;
  });
  assert.equal(back.acme?.status?.not_after, value.acme?.status?.not_after);
  assert.equal((await verifiedPeer(tlsPort, 'shop.example.test', root))?.serialNumber, peer.serialNumber);
  assert.equal(issued(), 1);

  // a PATCH keeps the issued pair (the merged object has cert and key) and orders nothing
  const patched = await gw.admin('PATCH', '/gateway/admin/ssls/1', { labels: { team: 'store' } });
  assert.equal(patched.status, 200, patched.text);
  assert.equal((await sslObject(gw, '1')).cert, value.cert);

  // a restart (the reload of a node) orders nothing: the object has a valid certificate
  await gw.stop();
  const restarted = await startGateway({ prefix: gw.prefix });
  t.after(() => restarted.stop());
  assert.equal((await verifiedPeer(tlsPort, 'shop.example.test', root))?.serialNumber, peer.serialNumber);
  await waitFor('the renewal scheduled', async () => (/acme: certificate "ssl-1-[^"]+" is valid until/.test(fs.readFileSync(path.join(gw.prefix, 'logs', 'error.log'), 'utf8')) ? true : undefined));
  assert.equal(issued(), 1);
});

test('tls-alpn-01 on the gateway\'s TLS port; a placeholder until issued; a failing issuer shows in the status', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort] = await freePorts(2);
  const pebble = await startPebble({ httpPort, tlsPort });
  t.after(() => pebble.stop());
  const gw = await startGateway({ yaml: yaml(pebble, httpPort, tlsPort, 'tls-alpn-01', 1) });
  t.after(() => gw.stop());
  const put = await gw.admin('PUT', '/gateway/admin/ssls/alpn', { sni: 'alpn.example.test', acme: { issuer: 'pebble', key: 'rsa:2048' } });
  assert.equal(put.status, 201, put.text);
  // before issuance a self-signed placeholder for the name (pebble may already have issued: then it is pebble's)
  const first = await servedCertificate(tlsPort, 'alpn.example.test');
  assert.equal(first.subjectaltname, 'DNS:alpn.example.test');
  const root = await pebble.root();
  const peer = await waitFor('the issued certificate', () => verifiedPeer(tlsPort, 'alpn.example.test', root), 60_000);
  assert.equal(peer.subjectaltname, 'DNS:alpn.example.test');
  assert.equal(peer.bits, 2048);

  // a name pebble cannot validate (it resolves, but nothing answers tls-alpn-01 for it there): failing, with the CA's error
  await pebble.stop();
  const bad = await gw.admin('PUT', '/gateway/admin/ssls/down', { snis: ['down.example.test'], acme: { issuer: 'pebble' } });
  assert.equal(bad.status, 201, bad.text);
  const status = await waitFor('the failing status', async () => {
    const v = await sslObject(gw, 'down');
    return v.acme?.status?.state === 'failing' ? v.acme.status : undefined;
  });
  assert.ok(status.last_error, JSON.stringify(status));
  assert.ok(Date.parse(status.next_attempt) > Date.now());
});

test('gateway nodes sharing etcd: one orders, the validator may reach another, every node serves the certificate', { skip: pebbleSkip || etcdSkip, timeout: 150_000 }, async (t) => {
  const etcd = await startEtcd();
  t.after(() => etcd.destroy());
  const [httpPort, tlsPort, aHttp, aTls] = await freePorts(4);
  const pebble = await startPebble({ httpPort, tlsPort });
  t.after(() => pebble.stop());
  // node A starts first and takes the lease; pebble validates on node B's ports
  const a = await startGateway({ yaml: yaml(pebble, aHttp, aTls, 'http-01', 1, etcd.url) });
  t.after(() => a.stop());
  const aLog = path.join(a.prefix, 'logs', 'error.log');
  await waitFor('node A to lead', async () => (/acme: this node \(.*\) orders the certificates/.test(fs.readFileSync(aLog, 'utf8')) ? true : undefined));
  const b = await startGateway({ yaml: yaml(pebble, httpPort, tlsPort, 'http-01', 1, etcd.url) });
  t.after(() => b.stop());
  const bLog = path.join(b.prefix, 'logs', 'error.log');
  await waitFor('node B to follow', async () => (/acme: another node orders the certificates/.test(fs.readFileSync(bLog, 'utf8')) ? true : undefined));

  const put = await b.admin('PUT', '/gateway/admin/ssls/c', { snis: ['cluster.example.test'], acme: { issuer: 'pebble' } });
  assert.equal(put.status, 201, put.text);
  const root = await pebble.root();
  const onB = await waitFor('the certificate on node B', () => verifiedPeer(tlsPort, 'cluster.example.test', root), 60_000);
  const onA = await waitFor('the certificate on node A', () => verifiedPeer(aTls, 'cluster.example.test', root));
  assert.equal(onA.serialNumber, onB.serialNumber);
  assert.match(pebble.log(), /Attempting to validate w\/ HTTP: http:\/\/cluster\.example\.test:\d+\/\.well-known\/acme-challenge\//);
  assert.equal((pebble.log().match(/Issued certificate serial/g) ?? []).length, 1);
  assert.match(fs.readFileSync(aLog, 'utf8'), /acme: certificate "ssl-c-[^"]+" issued by "pebble"/);
  assert.doesNotMatch(fs.readFileSync(bLog, 'utf8'), /acme: certificate "ssl-c-[^"]+" issued/);
  // the answer left the store once the authorization was final
  await waitFor('the challenge keys gone', async () => ((await etcd.call('/v3/kv/range', { key: Buffer.from('/gateway/gatehouse_acme/challenges/').toString('base64'), range_end: Buffer.from('/gateway/gatehouse_acme/challenges0').toString('base64'), count_only: true })).count === undefined ? true : undefined));
});

test('renewal of an SSL object\'s short-lived certificate at half its lifetime, written into the object and served without a reload', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort] = await freePorts(2);
  const pebble = await startPebble({ httpPort, tlsPort, validitySeconds: 20 });
  t.after(() => pebble.stop());
  const gw = await startGateway({ yaml: yaml(pebble, httpPort, tlsPort, 'http-01', 2) });
  t.after(() => gw.stop());
  assert.equal((await gw.admin('PUT', '/gateway/admin/ssls/r', { snis: ['renew.example.test'], acme: { issuer: 'pebble' } })).status, 201);
  const root = await pebble.root();
  const first = await waitFor('the first certificate', () => verifiedPeer(tlsPort, 'renew.example.test', root), 60_000);
  const status = await waitFor('the first status', async () => {
    const v = await sslObject(gw, 'r');
    return v.acme?.status?.state === 'valid' ? v.acme.status : undefined;
  });
  const from = Date.parse(status.not_before);
  const lifetime = Date.parse(status.not_after) - from;
  assert.ok(Math.abs(Date.parse(status.renew_at) - (from + lifetime / 2)) <= lifetime * 0.02 + 1000, `renew_at ${status.renew_at}`);
  const second = await waitFor('the renewed certificate', async () => {
    const p = await verifiedPeer(tlsPort, 'renew.example.test', root);
    return p && p.serialNumber !== first.serialNumber ? p : undefined;
  }, 40_000);
  assert.ok(Date.parse(second.valid_from) < Date.parse(first.valid_to), 'renewed before the first one expired');
  const renewed = await waitFor('the renewed status', async () => {
    const v = await sslObject(gw, 'r');
    return v.acme?.status?.not_after !== status.not_after && v.acme?.status?.state === 'valid' ? v : undefined;
  });
  assert.equal(renewed.key, undefined);
});

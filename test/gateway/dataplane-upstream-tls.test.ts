/**
 * Upstream TLS and the answer's framing, as APISIX: `tls.verify` checks an
 * https node's certificate against apisix.ssl.ssl_trusted_certificate and
 * the upstream host (a failure is APISIX's 502), `tls.client_key` is stored
 * encrypted with the data_encryption keyring and still sent, every answer
 * carries X-APISIX-Upstream-Status with
 * `show_upstream_status_in_response_header`, text answers say `charset=utf-8`
 * (nginx_config.http.charset), and the control API is on by default.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { freePorts, gatehouseBinary } from '../kit/server.ts';
import { Keyring, DEFAULT_KEYRING } from '../../src/gateway/data-encryption.ts';
import { defaultYaml, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';
import { TestCa } from './tls-kit.ts';
import { GATEHOUSE_VER } from '../kit/server-name.ts';

const trusted = new TestCa('Trusted Upstream CA');
const stranger = new TestCa('Unknown Upstream CA');
const client = trusted.issue(['gateway-client'], { client: true });

/** An https origin with `cert` that answers with the client certificate's CN, if any. */
async function httpsOrigin(cert: { cert: string; key: string }): Promise<{ server: https.Server; node: string }> {
  const server = https.createServer({ key: cert.key, cert: cert.cert, ca: trusted.cert, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    const peer = (req.socket as TLSSocket).getPeerCertificate();
    res.setHeader('Content-Type', 'text/plain');
    const sni = (req.socket as TLSSocket & { servername?: string | false }).servername;
    res.end(`client ${peer.subject?.CN ?? 'none'}${sni ? ` sni ${sni}` : ''}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, node: `127.0.0.1:${(server.address() as AddressInfo).port}` };
}

let gw: Gateway;
let controlPort: number;
let good: { server: https.Server; node: string };
let foreign: { server: https.Server; node: string };
let plain: Origin;

before(async () => {
  [controlPort] = await freePorts(1);
  good = await httpsOrigin(trusted.issue(['upstream.test']));
  foreign = await httpsOrigin(stranger.issue(['upstream.test']));
  plain = await startOrigin();
  const yaml = defaultYaml(1).replace('apisix:\n', `apisix:
  show_upstream_status_in_response_header: true
  enable_control: true
  control:
    ip: 127.0.0.1
    port: ${controlPort}
  ssl:
    enable: false
    ssl_trusted_certificate: ${trusted.certFile}
`);
  gw = await startGateway({ yaml });
});
after(async () => {
  await gw.stop();
  for (const s of [good.server, foreign.server]) { s.closeAllConnections(); s.close(); }
  await plain.close();
});

const APISIX_502 = '<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n'
  + `<hr><center>${GATEHOUSE_VER}</center>\r\n` + '<p><em>Powered by <a href="https://apisix.apache.org/">APISIX</a>.</em></p></body>\r\n</html>\r\n';

describe('tls.verify', () => {
  const upstream = (node: string, host: string, verify: boolean) => ({
    type: 'roundrobin', scheme: 'https', nodes: { [node]: 1 }, pass_host: 'rewrite', upstream_host: host, tls: { verify },
  });

  it('a node whose certificate the trusted CAs signed, for the upstream host, is used (the host as SNI)', async () => {
    await put(gw, 'routes/v1', { uri: '/v1', upstream: upstream(good.node, 'upstream.test', true) });
    const r = await untilRouted(gw, '/v1', (x) => x.status === 200);
    assert.equal(r.body, 'client none sni upstream.test');
  });

  it('a certificate from another CA fails the verification: APISIX\'s 502 page', async () => {
    await put(gw, 'routes/v2', { uri: '/v2', upstream: upstream(foreign.node, 'upstream.test', true) });
    const r = await untilRouted(gw, '/v2', (x) => x.status !== 404);
    assert.equal(r.status, 502);
    assert.equal(r.body, APISIX_502);
    assert.equal(r.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(r.headers['x-apisix-upstream-status'], '502');
    const log = fs.readFileSync(path.join(gw.prefix, 'logs', 'error.log'), 'utf8');
    assert.match(log, /upstream|SSL|certificate/i);
  });

  it('without verify the same node is used', async () => {
    await put(gw, 'routes/v3', { uri: '/v3', upstream: upstream(foreign.node, 'upstream.test', false) });
    const r = await untilRouted(gw, '/v3', (x) => x.status !== 404);
    assert.equal(r.status, 200);
  });

  it('a trusted certificate for another name than the upstream host: 502', async () => {
    await put(gw, 'routes/v4', { uri: '/v4', upstream: upstream(good.node, 'elsewhere.test', true) });
    const r = await untilRouted(gw, '/v4', (x) => x.status !== 404);
    assert.equal(r.status, 502);
  });
});

describe('tls.client_key at rest', () => {
  it('is stored encrypted with the keyring (upstream and a route\'s own upstream) and still sent', async () => {
    const keyring = new Keyring(DEFAULT_KEYRING);
    await put(gw, 'upstreams/mtls', { type: 'roundrobin', scheme: 'https', nodes: { [good.node]: 1 }, tls: { client_cert: client.cert, client_key: client.key } });
    const stored = await gw.admin('GET', '/gateway/admin/upstreams/mtls');
    const key = (stored.json as { value: { tls: { client_key: string } } }).value.tls.client_key;
    assert.ok(!key.includes('PRIVATE KEY'), 'the key is returned as stored, encrypted');
    assert.equal(keyring.decrypt(key), client.key);
    assert.ok(!fs.readFileSync(path.join(gw.prefix, 'data', 'gateway.sqlite')).includes('PRIVATE KEY'), 'no plain key in the store');

    await put(gw, 'routes/k1', { uri: '/k1', upstream_id: 'mtls' });
    assert.equal((await untilRouted(gw, '/k1', (x) => x.status === 200)).body, 'client gateway-client');

    await put(gw, 'routes/k2', { uri: '/k2', upstream: { type: 'roundrobin', scheme: 'https', nodes: { [good.node]: 1 }, tls: { client_cert: client.cert, client_key: client.key } } });
    const route = await gw.admin('GET', '/gateway/admin/routes/k2');
    assert.equal(keyring.decrypt((route.json as { value: { upstream: { tls: { client_key: string } } } }).value.upstream.tls.client_key), client.key);
    assert.equal((await untilRouted(gw, '/k2', (x) => x.status === 200)).body, 'client gateway-client');
  });

  it('a PATCH of another field keeps the stored key as it is (not encrypted twice)', async () => {
    const r = await gw.admin('PATCH', '/gateway/admin/upstreams/mtls', { retries: 1 });
    assert.equal(r.status, 200);
    const key = (r.json as { value: { tls: { client_key: string } } }).value.tls.client_key;
    assert.equal(new Keyring(DEFAULT_KEYRING).decrypt(key), client.key);
    await untilRouted(gw, '/k1', (x) => x.status === 200);
  });

  it('the key is never in the error log', () => {
    const log = fs.readFileSync(path.join(gw.prefix, 'logs', 'error.log'), 'utf8');
    assert.ok(!log.includes('PRIVATE KEY'));
  });
});

describe('answers', () => {
  it('show_upstream_status_in_response_header: X-APISIX-Upstream-Status on a 200 too', async () => {
    await put(gw, 'routes/s1', { uri: '/s1', upstream: { type: 'roundrobin', nodes: { [plain.node]: 1 } } });
    const r = await untilRouted(gw, '/s1', (x) => x.status === 200);
    assert.equal(r.headers['x-apisix-upstream-status'], '200');
  });

  it('charset utf-8: a text answer of the origin without a charset gets one, and the gateway\'s own 404', async () => {
    const r = await untilRouted(gw, '/v3', (x) => x.status === 200);
    assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
    const missing = await proxy(gw, '/no-such-route');
    assert.equal(missing.status, 404);
    // core.response.exit sets no type: default_type text/plain, then the charset (as APISIX answers)
    assert.equal(missing.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(missing.body, '{"error_msg":"404 Route Not Found"}\n');
  });

  it('the control API answers on its port', async () => {
    const r = await fetch(`http://127.0.0.1:${controlPort}/v1/healthcheck`);
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), []);
  });
});

describe('defaults in the nginx configuration', () => {
  const confOf = (yaml: string): string => {
    const prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-gwtls-'));
    fs.mkdirSync(path.join(prefix, 'conf'));
    fs.writeFileSync(path.join(prefix, 'conf', 'config.yaml'), yaml);
    const r = spawnSync(gatehouseBinary, ['gateway', '-p', prefix, '-T'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  };

  it('the control API on 127.0.0.1:9090 and charset utf-8, as APISIX\'s', () => {
    const conf = confOf('apisix:\n  node_listen: [9080]\n');
    assert.match(conf, /listen 127\.0\.0\.1:9090;\n\s+location \/v1\/healthcheck/);
    assert.match(conf, /^ {4}charset utf-8;$/m);
  });

  it('enable_control: false and nginx_config.http.charset change them', () => {
    const conf = confOf('apisix:\n  enable_control: false\nnginx_config:\n  http:\n    charset: koi8-r\n');
    assert.doesNotMatch(conf, /gateway_control/);
    assert.match(conf, /^ {4}charset koi8-r;$/m);
  });
});

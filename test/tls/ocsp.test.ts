/**
 * OCSP: stapling (`ssl_stapling`, `ssl_stapling_file`, `ssl_stapling_verify`,
 * `ssl_stapling_responder`) and client certificate checks (`ssl_ocsp`,
 * `ssl_ocsp_responder`, `ssl_ocsp_cache`), with responses made by
 * `openssl ocsp` and served by a small responder, the way nginx's
 * ssl_stapling.t and ssl_ocsp.t do it.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse, freePort } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { tlsExchange } from './client.ts';

let certs: CertFactory;
let responder: http.Server;
let responderPort: number;
const requests: string[] = [];

/** Answers with `<name>.der` where `<name>` is the certificate whose serial the request names. */
function serve(map: () => Array<[Buffer, string]>): http.RequestListener {
  return (req, res) => {
    const b64 = decodeURIComponent((req.url ?? '/').split('/').pop() ?? '');
    const body = Buffer.from(b64, 'base64');
    requests.push(req.url ?? '');
    for (const [serial, file] of map()) {
      if (body.includes(serial) && fs.existsSync(certs.file(file))) {
        res.writeHead(200, { 'Content-Type': 'application/ocsp-response' });
        res.end(certs.read(file));
        return;
      }
    }
    res.destroy();
  };
}

function serialDer(name: string): Buffer {
  const x = new crypto.X509Certificate(certs.read(`${name}.crt`));
  let hex = x.serialNumber;
  if (hex.length % 2) hex = '0' + hex;
  const bytes = Buffer.from(hex, 'hex');
  return Buffer.concat([Buffer.from([0x02, bytes.length]), bytes]);
}

before(async () => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-ocsp-')));
  responderPort = await freePort();
  const url = `http://127.0.0.1:${responderPort}`;
  certs.selfSigned('root');
  certs.signed('int', 'root', { ocspUrl: url });
  certs.signed('end', 'int', { ocspUrl: url, leaf: true });
  certs.signed('ec-end', 'int', { ocspUrl: url, leaf: true, ec: true });
  certs.signed('client', 'int', { ocspUrl: url, leaf: true });
  certs.signed('revoked-client', 'int', { ocspUrl: url, leaf: true });
  certs.revoke('revoked-client', 'int');
  certs.selfSigned('server');
  // responses signed by the issuer (int), and one signed by root (not allowed to answer for int's certificates)
  certs.ocspResponse('end.der', 'end', 'int');
  certs.ocspResponse('ec-end.der', 'ec-end', 'int');
  certs.ocspResponse('ec-end-root.der', 'ec-end', 'int', 'root');
  certs.ocspResponse('client.der', 'client', 'int');
  certs.ocspResponse('revoked-client.der', 'revoked-client', 'int');
  certs.ocspResponse('int.der', 'int', 'root');
  certs.concat('end-int.crt', 'end.crt', 'int.crt');
  certs.concat('ec-end-int.crt', 'ec-end.crt', 'int.crt');
  certs.concat('trusted.crt', 'int.crt', 'root.crt');
  const serials = (): Array<[Buffer, string]> => [
    [serialDer('end'), 'end.der'], [serialDer('ec-end'), 'ec-end.der'], [serialDer('client'), 'client.der'],
    [serialDer('revoked-client'), 'revoked-client.der'], [serialDer('int'), 'int.der'],
  ];
  responder = http.createServer(serve(serials));
  await new Promise<void>((r) => responder.listen(responderPort, '127.0.0.1', r));
});

after(() => {
  responder?.close();
  fs.rmSync(certs.dir, { recursive: true, force: true });
});

function files(): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  for (const f of fs.readdirSync(certs.dir)) if (/\.(crt|key|der)$/.test(f)) out[f] = certs.read(f);
  return out;
}

/** The certificate status in a stapled response ('good' / 'revoked'), read with openssl. */
function stapledStatus(resp: Buffer | undefined): string {
  if (!resp) return 'none';
  const der = resp.toString('hex');
  // SingleResponse certStatus: good is [0] IMPLICIT NULL (80 00), revoked [1] (a1 ..)
  return /8000180f/.test(der) ? 'good' : /a111180f/.test(der) ? 'revoked' : 'other';
}

async function staple(port: number, sigalgs: string, attempts = 20): Promise<Buffer | undefined> {
  // the first handshakes go without a staple; the response is fetched meanwhile
  for (let i = 0; i < attempts; i++) {
    const r = await tlsExchange(port, { sigalgs, requestOCSP: true });
    if (r.ocsp) return r.ocsp;
    await new Promise((res) => setTimeout(res, 100));
  }
  return undefined;
}

test('ssl_stapling staples the response of the certificate the handshake uses', async (t) => {
  const srv = await startGatehouse({
    conf: `
events {}
http {
    ssl_stapling on;
    ssl_trusted_certificate trusted.crt;
    ssl_certificate ec-end-int.crt;
    ssl_certificate_key ec-end.key;
    ssl_certificate end-int.crt;
    ssl_certificate_key end.key;
    server { listen 127.0.0.1:%%PORT_8443%% ssl; }
    server { listen 127.0.0.1:%%PORT_8444%% ssl; ssl_stapling_verify on; }
    server {
        listen 127.0.0.1:%%PORT_8445%% ssl;
        ssl_certificate end-int.crt;
        ssl_certificate_key end.key;
        ssl_stapling_file %%PREFIX%%/ec-end.der;
    }
}
`, files: files(),
  });
  t.after(() => srv.stop());
  const rsa = await staple(srv.port(8443), 'rsa_pss_rsae_sha256:rsa_pkcs1_sha256');
  assert.equal(stapledStatus(rsa), 'good');
  assert.ok(rsa!.includes(serialDer('end')), 'the RSA certificate\'s response');
  const ec = await staple(srv.port(8443), 'ecdsa_secp256r1_sha256');
  assert.ok(ec!.includes(serialDer('ec-end')), 'the ECDSA certificate\'s response');
  // verified: int signed these responses and int is trusted
  const verified = await staple(srv.port(8444), 'ecdsa_secp256r1_sha256');
  assert.ok(verified!.includes(serialDer('ec-end')));
  // the stored file, stapled from the first handshake on, without asking the responder
  const before = requests.length;
  const file = await staple(srv.port(8445), 'rsa_pss_rsae_sha256', 1);
  assert.ok(file!.equals(certs.read('ec-end.der')));
  assert.equal(requests.length, before);
});

test('ssl_stapling_verify refuses a response signed by another CA, with nginx\'s log line', async (t) => {
  const srv = await startGatehouse({
    conf: `
events {}
http {
    ssl_stapling on;
    ssl_stapling_verify on;
    ssl_trusted_certificate trusted.crt;
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        ssl_certificate ec-end-int.crt;
        ssl_certificate_key ec-end.key;
        ssl_stapling_responder http://127.0.0.1:%%PORT_8081%%/;
    }
}
`, files: files(),
  });
  t.after(() => srv.stop());
  const root = http.createServer((_req, res) => { res.writeHead(200); res.end(certs.read('ec-end-root.der')); });
  await new Promise<void>((r) => root.listen(srv.port(8081), '127.0.0.1', r));
  t.after(() => root.close());
  assert.equal(await staple(srv.port(8443), 'ecdsa_secp256r1_sha256', 5), undefined);
  await srv.waitForLog('error.log', /\[error\].*OCSP_basic_verify\(\) failed \(SSL: error:13800070:OCSP routines::root ca not trusted\) while requesting certificate status/);
});

test('ssl_ocsp checks client certificates at their responder; ssl_ocsp_cache keeps answers', async (t) => {
  const srv = await startGatehouse({
    conf: `
events {}
http {
    ssl_certificate server.crt;
    ssl_certificate_key server.key;
    ssl_verify_client on;
    ssl_verify_depth 2;
    ssl_client_certificate trusted.crt;
    add_header X-Verify $ssl_client_verify always;
    server { listen 127.0.0.1:%%PORT_8443%% ssl; ssl_ocsp leaf; location / { return 200 "ok"; } }
    server { listen 127.0.0.1:%%PORT_8444%% ssl; ssl_ocsp on; ssl_ocsp_cache shared:OCSP:1m; location / { return 200 "ok"; } }
}
`, files: files(),
  });
  t.after(() => srv.stop());
  const get = async (port: number, name: string) => (await tlsExchange(port, {
    cert: certs.read(`${name}.crt`), key: certs.read(`${name}.key`),
  })).data.toString();
  assert.match(await get(srv.port(8443), 'client'), /200 OK[\s\S]*X-Verify: SUCCESS/);
  assert.match(await get(srv.port(8443), 'revoked-client'), /400 Bad Request[\s\S]*X-Verify: FAILED:certificate revoked/);
  // the whole chain: int is asked about too
  const before = requests.length;
  assert.match(await get(srv.port(8444), 'client'), /X-Verify: SUCCESS/);
  assert.equal(requests.length - before, 2);
  // cached: no new requests
  assert.match(await get(srv.port(8444), 'client'), /X-Verify: SUCCESS/);
  assert.equal(requests.length - before, 2);
});

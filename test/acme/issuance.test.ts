// Certificates from a real ACME server (pebble on loopback): http-01 and
// tls-alpn-01 answered by Gatehouse itself, the certificate served by every
// worker on the first connection after issuance, without a reload, and
// checked by clients that trust only pebble's root.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import { startGatehouse, freePorts } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';
import { pebbleSkip, servedCertificate, startPebble, verifiedPeer, waitFor } from './pebble.ts';
import type { Pebble } from './pebble.ts';

interface Setup { pebble: Pebble; httpPort: number; tlsPort: number }

async function setup(t: { after(fn: () => unknown): void }, eab?: Record<string, string>): Promise<Setup> {
  const [httpPort, tlsPort] = await freePorts(2);
  const pebble = await startPebble({ httpPort, tlsPort, eab });
  t.after(() => pebble.stop());
  return { pebble, httpPort, tlsPort };
}

function issuer(s: Setup, name: string, extra = ''): string {
  return `acme_issuer ${name} { uri ${s.pebble.url}; ssl_trusted_certificate ${s.pebble.trusted}; accept_terms_of_service; contact admin@example.test; ${extra} }`;
}

function httpsGet(port: number, servername: string, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    https.get({ host: '127.0.0.1', port, servername, ca, path: '/', headers: { host: servername } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}

const SECURE_SERVER = (s: Setup, names: string, extra = '') => `
    server {
        listen 127.0.0.1:${s.tlsPort} ssl;
        server_name ${names};
        acme_certificate pebble;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
        ${extra}
        location / { return 200 "secure $server_name\\n"; }
    }`;

test('http-01: issued by pebble, served by every worker without a reload, verified with pebble\'s root', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const s = await setup(t);
  const srv = await startGatehouse({
    conf: `
worker_processes 2;
events {}
http {
    ${issuer(s, 'pebble')}
    server {
        listen 127.0.0.1:${s.httpPort};
        location / { return 404; }
        location = /acme-status { acme_status; }
    }
    ${SECURE_SERVER(s, 'example.test www.example.test')}
}
`,
  });
  t.after(() => srv.stop());
  // before the first certificate: a self-signed placeholder, and the error log says why
  await srv.waitForLog('error.log', /\[error\] .*acme: no certificate for "example\.test www\.example\.test" from issuer "pebble" yet, serving a self-signed placeholder/, 15_000);
  const root = await s.pebble.root();
  const peer = await waitFor('the issued certificate', () => verifiedPeer(s.tlsPort, 'www.example.test', root), 60_000);
  assert.equal(peer.subjectaltname, 'DNS:example.test, DNS:www.example.test');
  assert.match(String(peer.issuer.CN), /^Pebble Intermediate CA/);
  // every connection now gets it, whichever worker accepts it
  for (let i = 0; i < 8; i++) {
    const again = await verifiedPeer(s.tlsPort, 'example.test', root);
    assert.equal(again?.serialNumber, peer.serialNumber, `connection ${i}`);
  }
  assert.equal(await httpsGet(s.tlsPort, 'example.test', root), 'secure example.test\n');
  // a browser-grade client: openssl with -verify_return_error against pebble's root
  fs.writeFileSync(srv.path('root.pem'), root);
  const out = await new Promise<string>((resolve, reject) => {
    const p = execFile('openssl', ['s_client', '-connect', `127.0.0.1:${s.tlsPort}`, '-servername', 'example.test', '-verify_return_error', '-CAfile', srv.path('root.pem')],
      (err, stdout) => (err ? reject(err) : resolve(stdout)));
    p.stdin?.end();
  });
  assert.match(out, /Verify return code: 0 \(ok\)/);
  // pebble validated over http-01, against the plain-HTTP server
  assert.match(s.pebble.log(), /Attempting to validate w\/ HTTP: http:\/\/example\.test:\d+\/\.well-known\/acme-challenge\//);
  const files = fs.readdirSync(srv.path('acme_pebble')).sort();
  assert.deepEqual(files.filter((f) => !f.startsWith('example.test-')), ['account.key']);
  assert.equal(files.filter((f) => /^example\.test-[0-9a-f]{16}\.(crt|key)$/.test(f)).length, 2);
  // a challenge token nobody asked for falls through to the server's own handling
  const miss = await httpGet(s.httpPort, '/.well-known/acme-challenge/nope', { Host: 'example.test' });
  assert.equal(miss.status, 404);

  // the status: the certificate, its validity and when it renews
  const status = await waitFor('the valid status', async () => {
    const res = await httpGet(s.httpPort, '/acme-status', { Host: 'localhost' });
    const body = JSON.parse(res.body.toString()) as { certificates: Array<Record<string, unknown>> };
    return body.certificates[0]?.state === 'valid' ? { res, cert: body.certificates[0] } : undefined;
  }, 15_000);
  assert.equal(status.res.header('content-type'), 'application/json');
  assert.match(String(status.cert.name), /^example\.test-[0-9a-f]{16}$/);
  assert.equal(status.cert.issuer, 'pebble');
  assert.deepEqual(status.cert.identifiers, ['example.test', 'www.example.test']);
  assert.equal(Date.parse(String(status.cert.not_after)), Date.parse(peer.valid_to));
  const lifetime = Date.parse(peer.valid_to) - Date.parse(peer.valid_from);
  const renewAt = Date.parse(String(status.cert.renew_at));
  assert.ok(Math.abs(renewAt - (Date.parse(peer.valid_from) + lifetime * 2 / 3)) <= lifetime * 0.02 + 1000, `renewal at ⅔ of the lifetime: ${String(status.cert.renew_at)}`);
  assert.equal(status.cert.last_error, undefined);

  // a reload keeps the valid certificate and orders nothing
  const issuedBefore = s.pebble.log().match(/Issued certificate serial/g)?.length;
  assert.equal(issuedBefore, 1);
  const from = srv.logSize();
  await srv.reload();
  await srv.waitForLog('error.log', /acme: certificate "example\.test-[0-9a-f]+" is valid until/, 15_000, from);
  assert.equal((await verifiedPeer(s.tlsPort, 'example.test', root))?.serialNumber, peer.serialNumber);
  assert.equal(s.pebble.log().match(/Issued certificate serial/g)?.length, 1);
});

test('tls-alpn-01: answered in the handshake (no plain-HTTP server at all)', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const s = await setup(t);
  const srv = await startGatehouse({
    conf: `
events {}
http {
    ${issuer(s, 'pebble', 'challenge tls-alpn-01;')}
    ${SECURE_SERVER(s, 'alpn.test')}
}
`,
  });
  t.after(() => srv.stop());
  const placeholder = await servedCertificate(s.tlsPort, 'alpn.test');
  const root = await s.pebble.root();
  const peer = await waitFor('the issued certificate', () => verifiedPeer(s.tlsPort, 'alpn.test', root), 60_000);
  assert.equal(peer.subjectaltname, 'DNS:alpn.test');
  assert.notEqual(peer.serialNumber, placeholder.serialNumber);
  assert.doesNotMatch(s.pebble.log(), /validate w\/ HTTP/);
  assert.equal(await httpsGet(s.tlsPort, 'alpn.test', root), 'secure alpn.test\n');
});

test('preferred_chain: the alternate chain whose top is issued by that CN', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort] = await freePorts(2);
  const pebble = await startPebble({ httpPort, tlsPort, alternateRoots: 1 });
  t.after(() => pebble.stop());
  const alternate = await pebble.root(1);
  const cn = /^CN=(.*)$/m.exec(new crypto.X509Certificate(alternate).subject)![1];
  const s: Setup = { pebble, httpPort, tlsPort };
  const srv = await startGatehouse({
    conf: `
events {}
http {
    ${issuer(s, 'pebble', `preferred_chain "${cn}"; common_name_in_csr on;`)}
    server { listen 127.0.0.1:${httpPort}; }
    ${SECURE_SERVER(s, 'chain.test')}
}
`,
  });
  t.after(() => srv.stop());
  const peer = await waitFor('the certificate on the alternate chain', () => verifiedPeer(tlsPort, 'chain.test', alternate), 60_000);
  assert.equal(peer.subject.CN, 'chain.test', 'common_name_in_csr on');
  assert.equal(await verifiedPeer(tlsPort, 'chain.test', await pebble.root(0)), undefined, 'not the default chain');
});

test('the ACME server\'s name is looked up with the http block\'s resolver, as in nginx-acme', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort] = await freePorts(2);
  const pebble = await startPebble({ httpPort, tlsPort });
  t.after(() => pebble.stop());
  // acme.test exists only in pebble-challtestsrv's DNS, not for the system resolver
  const url = pebble.url.replace('127.0.0.1', 'acme.test');
  const srv = await startGatehouse({
    conf: `
events {}
http {
    resolver 127.0.0.1:${pebble.dnsPort} ipv6=off;
    acme_issuer pebble { uri ${url}; ssl_trusted_certificate ${pebble.trusted}; accept_terms_of_service; state_path off; }
    server { listen 127.0.0.1:${httpPort}; }
    ${SECURE_SERVER({ pebble, httpPort, tlsPort }, 'resolved.test')}
}
`,
  });
  t.after(() => srv.stop());
  const root = await pebble.root();
  const peer = await waitFor('the issued certificate', () => verifiedPeer(tlsPort, 'resolved.test', root), 60_000);
  assert.equal(peer.subjectaltname, 'DNS:resolved.test');
});

test('an IP identifier (RFC 8738) by http-01, served to a client without SNI', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const s = await setup(t);
  const srv = await startGatehouse({
    conf: `
events {}
http {
    ${issuer(s, 'pebble')}
    server { listen 127.0.0.1:${s.httpPort}; }
    server {
        listen 127.0.0.1:${s.tlsPort} ssl;
        acme_certificate pebble 127.0.0.1;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
}
`,
  });
  t.after(() => srv.stop());
  const root = await s.pebble.root();
  const peer = await waitFor('the certificate for 127.0.0.1', () => verifiedPeer(s.tlsPort, undefined, root), 60_000);
  assert.equal(peer.subjectaltname, 'IP Address:127.0.0.1');
});

test('tls-alpn-01 for an IP identifier: the validator\'s reverse name (RFC 8738)', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const s = await setup(t);
  const srv = await startGatehouse({
    conf: `
events {}
http {
    ${issuer(s, 'pebble', 'challenge tls-alpn-01;')}
    server {
        listen 127.0.0.1:${s.tlsPort} ssl;
        acme_certificate pebble 127.0.0.1;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
}
`,
  });
  t.after(() => srv.stop());
  const root = await s.pebble.root();
  const peer = await waitFor('the certificate for 127.0.0.1', () => verifiedPeer(s.tlsPort, undefined, root), 60_000);
  assert.equal(peer.subjectaltname, 'IP Address:127.0.0.1');
});

/**
 * Client chains whose intermediates only the client sends (its certificate
 * file holds them, `ssl_client_certificate` has the root): `ssl_verify_depth`
 * counts them as OpenSSL does for nginx (depth N allows N), `ssl_crl` checks
 * each of them, and `$ssl_client_verify` shows OpenSSL's last error. Gatehouse
 * and Debian's nginx run the same configuration (http and stream); each
 * client must see the same bytes from both.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startPair } from '../kit/pair.ts';
import type { RunningServer } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { exchange, same, seen } from './differential-kit.ts';
import { tlsExchange } from './client.ts';

let certs: CertFactory;
let files: Record<string, Buffer>;

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-vdepth-')));
  certs.selfSigned('server');
  certs.selfSigned('root');
  certs.signed('int1', 'root');
  certs.signed('int2', 'int1');
  certs.signed('int3', 'int2');
  certs.signed('c0', 'root', { leaf: true });
  certs.signed('c1', 'int1', { leaf: true });
  certs.signed('c2', 'int2', { leaf: true });
  certs.signed('c3', 'int3', { leaf: true });
  certs.concat('c1-chain.crt', 'c1.crt', 'int1.crt');
  certs.concat('c2-chain.crt', 'c2.crt', 'int2.crt', 'int1.crt');
  certs.concat('c3-chain.crt', 'c3.crt', 'int3.crt', 'int2.crt', 'int1.crt');
  // the chain in another order than issued: OpenSSL finds each issuer among what was sent
  certs.concat('c3-shuffled.crt', 'c3.crt', 'int1.crt', 'int3.crt', 'int2.crt');
  certs.concat('c2-partial.crt', 'c2.crt', 'int2.crt');
  certs.concat('root-int1.crt', 'root.crt', 'int1.crt');
  // CRLs before and after int1 is revoked by the root
  certs.crl('root-clean.crl', 'root');
  certs.crl('int1.crl', 'int1');
  certs.crl('int2.crl', 'int2');
  certs.revoke('int1', 'root');
  certs.crl('root-revoked.crl', 'root');
  certs.concat('clean.crl', 'root-clean.crl', 'int1.crl', 'int2.crl');
  certs.concat('revoked.crl', 'root-revoked.crl', 'int1.crl', 'int2.crl');
  certs.concat('no-int2.crl', 'root-clean.crl', 'int1.crl');
  files = {};
  for (const f of fs.readdirSync(certs.dir)) if (/\.(crt|key|crl)$/.test(f)) files[f] = certs.read(f);
});
after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

function server(port: string, verify: string): string {
  return `
    server {
        listen 127.0.0.1:%%PORT_${port}%% ssl;
        ${verify}
        location / { return 200 "$ssl_client_verify|$ssl_client_s_dn|$ssl_client_i_dn\\n"; }
    }`;
}

const conf = `
events {}
http {
    error_log %%PREFIX%%/info.log info;
    access_log off;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate server.crt;
    ssl_certificate_key server.key;
    ssl_client_certificate root.crt;
    add_header X-Verify $ssl_client_verify always;
    ${server('8450', 'ssl_verify_client optional; ssl_verify_depth 0;')}
    ${server('8451', 'ssl_verify_client on; ssl_verify_depth 1;')}
    ${server('8452', 'ssl_verify_client optional; ssl_verify_depth 2;')}
    ${server('8453', 'ssl_verify_client on; ssl_verify_depth 1; ssl_client_certificate root-int1.crt;')}
    ${server('8454', 'ssl_verify_client on; ssl_verify_depth 3; ssl_crl revoked.crl;')}
    ${server('8455', 'ssl_verify_client on; ssl_verify_depth 3; ssl_crl no-int2.crl;')}
    ${server('8456', 'ssl_verify_client on; ssl_verify_depth 3; ssl_crl clean.crl;')}
    ${server('8457', 'ssl_verify_client optional_no_ca; ssl_verify_depth 1;')}
}
`;

/** A request on `port` with the client certificate file `cert` (leaf, then what the client sends with it). */
function withCert(port: number, cert: string, maxVersion?: 'TLSv1.2' | 'TLSv1.3') {
  return (srv: RunningServer) => exchange(srv, port, {
    cert: certs.read(`${cert}.crt`), key: certs.read(`${cert.replace(/-.*$/, '')}.key`), maxVersion,
  }, true);
}

/** Two connections with `cert`, the second resuming the first's session. */
function resumed(port: number, cert: string, maxVersion: 'TLSv1.2' | 'TLSv1.3') {
  return async (srv: RunningServer) => {
    const opts = { cert: certs.read(`${cert}.crt`), key: certs.read(`${cert.replace(/-.*$/, '')}.key`), maxVersion };
    const first = await tlsExchange(srv.port(port), opts);
    return seen(await tlsExchange(srv.port(port), { ...opts, session: first.session }), { withHeaders: true });
  };
}

const VERIFY = /\r\nX-Verify: ([^\r]*)\r\n/;

test('ssl_verify_depth N allows N intermediates sent by the client, as nginx (TLS 1.2 and 1.3)', async (t) => {
  const pair = await startPair(t, { conf, files });
  const sent = ['c0', 'c1-chain', 'c2-chain', 'c3-chain'];
  for (const maxVersion of ['TLSv1.2', 'TLSv1.3'] as const) {
    for (const [port, depth] of [[8450, 0], [8451, 1], [8452, 2]] as const) {
      for (let n = 0; n < sent.length; n++) {
        const seen = await same(pair, `depth ${depth}, ${n} intermediates, ${maxVersion}`, withCert(port, sent[n], maxVersion));
        const verdict = VERIFY.exec(seen.response!)?.[1];
        assert.equal(verdict, n <= depth ? 'SUCCESS' : 'FAILED:unable to get local issuer certificate', `depth ${depth}, ${n} intermediates`);
        if (n > depth) assert.match(seen.response!, /^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*The SSL certificate error/);
      }
    }
  }
  const shuffled = await same(pair, 'three intermediates in another order, depth 2', withCert(8452, 'c3-shuffled'));
  assert.equal(VERIFY.exec(shuffled.response!)?.[1], 'FAILED:unable to get local issuer certificate');
  // a resumed session has the client's certificate but not the chain it sent: the first verdict stands
  for (const maxVersion of ['TLSv1.2', 'TLSv1.3'] as const) {
    const again = await same(pair, `resumed, two intermediates, depth 2, ${maxVersion}`, resumed(8452, 'c2-chain', maxVersion));
    assert.equal(again.reused, true);
    assert.equal(VERIFY.exec(again.response!)?.[1], 'SUCCESS');
    // and a chain over the limit stays refused, its ticket notwithstanding
    const refused = await same(pair, `resumed, two intermediates, depth 1, ${maxVersion}`, resumed(8451, 'c2-chain', maxVersion));
    assert.equal(refused.reused, true);
    assert.equal(VERIFY.exec(refused.response!)?.[1], 'FAILED:unable to get local issuer certificate');
  }
  const logged = pair.gh.logLines('info.log').filter((l) => /client SSL certificate verify error/.test(l));
  assert.ok(logged.some((l) => l.includes('(20:unable to get local issuer certificate) while reading client request headers')), logged.join('\n'));
});

test('incomplete chains, trusted intermediates, optional_no_ca, as nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  // a certificate alone whose issuer is unknown: OpenSSL's last word is about its signature
  const lone = await same(pair, 'leaf without its intermediate', withCert(8452, 'c1'));
  assert.equal(VERIFY.exec(lone.response!)?.[1], 'FAILED:unable to verify the first certificate');
  const partial = await same(pair, 'chain without its first intermediate', withCert(8452, 'c2-partial'));
  assert.equal(VERIFY.exec(partial.response!)?.[1], 'FAILED:unable to get local issuer certificate');
  // int1 trusted: the chain reaches it within the limit or not
  await same(pair, 'trusted intermediate, one sent', withCert(8453, 'c2-partial'));
  await same(pair, 'trusted intermediate, two sent', withCert(8453, 'c3-chain'));
  await same(pair, 'trusted intermediate, its own leaf', withCert(8453, 'c1'));
  // optional_no_ca lets the unknown-issuer errors through, a chain over the limit among them
  const noCa = await same(pair, 'optional_no_ca, over the limit', withCert(8457, 'c2-chain'));
  assert.match(noCa.response!, /^HTTP\/1\.1 200 [\s\S]*\r\n\r\nFAILED:unable to get local issuer certificate\|CN=c2\|CN=int2\n$/);
  await same(pair, 'optional_no_ca, lone leaf', withCert(8457, 'c1'));
});

test('ssl_crl checks each intermediate the client sent, as nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const revoked = await same(pair, 'revoked intermediate sent by the client', withCert(8454, 'c2-chain'));
  assert.equal(VERIFY.exec(revoked.response!)?.[1], 'FAILED:certificate revoked');
  await same(pair, 'revoked intermediate, its own leaf', withCert(8454, 'c1-chain'));
  const ok = await same(pair, 'every CRL, none revoked', withCert(8456, 'c2-chain'));
  assert.match(ok.response!, /\r\n\r\nSUCCESS\|CN=c2\|CN=int2\n$/);
  await same(pair, 'no CRL of the third intermediate', withCert(8456, 'c3-chain'));
  const missing = await same(pair, 'no CRL of the second intermediate', withCert(8455, 'c2-chain'));
  assert.equal(VERIFY.exec(missing.response!)?.[1], 'FAILED:unable to get certificate CRL');
  await same(pair, 'no CRL needed past the first intermediate', withCert(8455, 'c1-chain'));
});

const streamConf = `
events {}
stream {
    error_log %%PREFIX%%/info.log info;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate server.crt;
    ssl_certificate_key server.key;
    ssl_client_certificate root.crt;
    server {
        listen 127.0.0.1:%%PORT_8460%% ssl;
        ssl_verify_client optional_no_ca;
        ssl_verify_depth 1;
        return "$ssl_client_verify|$ssl_client_s_dn\\n";
    }
    server {
        listen 127.0.0.1:%%PORT_8461%% ssl;
        ssl_verify_client on;
        ssl_verify_depth 2;
        ssl_crl revoked.crl;
        return "$ssl_client_verify|$ssl_client_s_dn\\n";
    }
}
`;

test('stream: ssl_verify_depth and ssl_crl on client-sent intermediates, as nginx', async (t) => {
  const pair = await startPair(t, { conf: streamConf, files, nginxModules: ['ngx_stream_module'] });
  const one = await same(pair, 'stream, one intermediate, depth 1', withCert(8460, 'c1-chain'));
  assert.equal(one.response, 'SUCCESS|CN=c1\n');
  const two = await same(pair, 'stream, two intermediates, depth 1', withCert(8460, 'c2-chain'));
  assert.equal(two.response, 'FAILED:unable to get local issuer certificate|CN=c2\n');
  // ssl_verify_client on: a failed check closes the connection, as in nginx
  const revoked = await same(pair, 'stream, revoked intermediate', withCert(8461, 'c2-chain'));
  assert.equal(revoked.response, '');
});

/**
 * Client certificates against nginx: `ssl_verify_client on|optional|
 * optional_no_ca`, `ssl_client_certificate`, `ssl_verify_depth`, `ssl_crl`,
 * expired and revoked certificates, unknown issuers. Gatehouse and Debian's
 * nginx run the same configuration; each client must see the same response
 * from both, byte for byte (the 400 pages, headers, the `$ssl_client_*`
 * variables), and nginx's log lines.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startPair } from '../kit/pair.ts';
import type { RunningServer } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { exchange, logLines, same } from './differential-kit.ts';

let certs: CertFactory;
let files: Record<string, Buffer>;

/** A certificate of `issuer` whose validity ended years ago (openssl ca with fixed dates). */
function expired(name: string, issuer: string): void {
  const dir = certs.dir;
  certs.write('expired-ca.conf', [
    '[ ca ]', 'default_ca = myca', '[ myca ]', `new_certs_dir = ${dir}`, `database = ${dir}/certindex`, 'default_md = sha256',
    'policy = myca_policy', `serial = ${dir}/certserial`, 'unique_subject = no', '[ myca_policy ]', 'commonName = supplied', '',
  ].join('\n'));
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  run('req', '-new', '-config', 'openssl.conf', '-subj', `/CN=${name}/`, '-out', `${name}.csr`, '-keyout', `${name}.key`);
  run('ca', '-batch', '-config', 'expired-ca.conf', '-keyfile', `${issuer}.key`, '-cert', `${issuer}.crt`,
    '-startdate', '20200101000000Z', '-enddate', '20200102000000Z', '-in', `${name}.csr`, '-out', `${name}.crt`);
}

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-dverify-')));
  certs.selfSigned('server');
  certs.selfSigned('root', { subject: '/C=DE/O=Root, Inc./CN=Root CA/' });
  certs.signed('int', 'root');
  certs.signed('int2', 'int');
  certs.signed('direct', 'root', { leaf: true, subject: '/C=US/O=Acme/OU=R\\+D/CN=J\u00f6rg #1/' });
  certs.signed('chained', 'int', { leaf: true });
  certs.signed('deep', 'int2', { leaf: true });
  certs.signed('revoked', 'root', { leaf: true });
  certs.revoke('revoked', 'root');
  certs.crl('root.crl', 'root');
  certs.crl('int.crl', 'int');
  certs.selfSigned('stranger');
  expired('expired', 'root');
  certs.concat('root-int.crt', 'root.crt', 'int.crt');
  certs.concat('chained-int.crt', 'chained.crt', 'int.crt');
  certs.concat('deep-chain.crt', 'deep.crt', 'int2.crt', 'int.crt');
  files = {};
  for (const f of fs.readdirSync(certs.dir)) if (/\.(crt|key|crl)$/.test(f)) files[f] = certs.read(f);
});
after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

const VARS = '"$ssl_client_verify|$ssl_client_s_dn|$ssl_client_i_dn|$ssl_client_serial|$ssl_client_fingerprint|$ssl_client_v_remain\\n"';

function server(port: string, verify: string): string {
  return `
    server {
        listen 127.0.0.1:%%PORT_${port}%% ssl;
        ${verify}
        location / { return 200 ${VARS}; }
        location /escaped { return 200 "$ssl_client_escaped_cert"; }
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
    add_header X-Verify $ssl_client_verify always;
    ${server('8443', 'ssl_verify_client on; ssl_client_certificate root.crt;')}
    ${server('8444', 'ssl_verify_client optional; ssl_client_certificate root.crt; ssl_crl root.crl;')}
    ${server('8445', 'ssl_verify_client optional_no_ca; ssl_client_certificate root.crt;')}
    ${server('8446', 'ssl_verify_client on; ssl_client_certificate root.crt; ssl_verify_depth 2;')}
    ${server('8447', 'ssl_verify_client on; ssl_client_certificate root-int.crt; ssl_crl int.crl;')}
    ${server('8448', 'ssl_verify_client on; ssl_client_certificate root.crt; ssl_verify_depth 0;')}
}
`;

/** A request on `port` with the client certificate `cert` (a file with its chain) and its key. */
function withCert(port: number, cert: string | undefined, opts: { path?: string; headers?: boolean; maxVersion?: 'TLSv1.2' | 'TLSv1.3' } = {}) {
  return (srv: RunningServer) => exchange(srv, port, {
    ...(cert ? { cert: certs.read(`${cert}.crt`), key: certs.read(`${cert.replace(/-.*$/, '')}.key`) } : {}),
    maxVersion: opts.maxVersion,
    request: `GET ${opts.path ?? '/'} HTTP/1.0\r\nHost: localhost\r\n\r\n`,
  }, opts.headers);
}

test('ssl_verify_client on: the 400 pages and the variables, as nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const none = await same(pair, 'on, no certificate', withCert(8443, undefined, { headers: true }));
  assert.match(none.response!, /^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*No required SSL certificate was sent/);
  for (const maxVersion of ['TLSv1.2', 'TLSv1.3'] as const) {
    const ok = await same(pair, `on, certificate of the CA, ${maxVersion}`, withCert(8443, 'direct', { headers: true, maxVersion }));
    assert.match(ok.response!, /\r\nX-Verify: SUCCESS\r\n[\s\S]*\r\nSUCCESS\|OU=R\\\+D,O=Acme,C=US,CN=J\\C3\\B6rg #1\|CN=Root CA,O=Root\\, Inc\.,C=DE\|[0-9A-F]+\|[0-9a-f]{40}\|[23]\n$/);
  }
  const chained = await same(pair, 'on, one intermediate sent by the client', withCert(8443, 'chained-int'));
  assert.match(chained.response!, /^SUCCESS\|CN=chained\|CN=int\|/);
  const deepOk = await same(pair, 'on, two intermediates, depth 2', withCert(8446, 'deep-chain'));
  assert.match(deepOk.response!, /^SUCCESS\|CN=deep\|CN=int2\|/);
  const old = await same(pair, 'on, expired', withCert(8443, 'expired', { headers: true }));
  assert.match(old.response!, /^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*X-Verify: FAILED:certificate has expired\r\n[\s\S]*The SSL certificate error/);
  await same(pair, 'on, unknown issuer', withCert(8443, 'stranger', { headers: true }));
  const escaped = await same(pair, '$ssl_client_escaped_cert', withCert(8443, 'direct', { path: '/escaped' }));
  assert.equal(decodeURIComponent(escaped.response!), certs.read('direct.crt').toString().replace(/^[\s\S]*?(?=-----BEGIN)/, ''));
  const logged = await same(pair, 'info lines', async (srv) => {
    await new Promise((r) => setTimeout(r, 200));
    return logLines(srv, /client (sent no required|SSL certificate verify error)/, 'info.log');
  });
  assert.ok(logged.length >= 3, logged.join('\n'));
});

test('ssl_verify_depth 1 refuses two intermediates sent by the client', async (t) => {
  const pair = await startPair(t, { conf, files });
  const deep = await same(pair, 'on, two intermediates, depth 1', withCert(8443, 'deep-chain', { headers: true }));
  assert.match(deep.response!, /^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*X-Verify: FAILED:unable to get local issuer certificate\r\n/);
});

test('ssl_verify_client optional with ssl_crl, optional_no_ca, as nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  assert.match((await same(pair, 'optional, none', withCert(8444, undefined))).response!, /^NONE\|\|\|\|\|\n$/);
  assert.match((await same(pair, 'optional, valid, CRL of the root', withCert(8444, 'direct'))).response!, /^SUCCESS\|/);
  const revoked = await same(pair, 'optional, revoked', withCert(8444, 'revoked', { headers: true }));
  assert.match(revoked.response!, /^HTTP\/1\.1 400 [\s\S]*X-Verify: FAILED:certificate revoked\r\n/);
  // the intermediate has no CRL: nginx checks CRLs for the whole chain
  await same(pair, 'optional, intermediate without CRL', withCert(8444, 'chained-int', { headers: true }));
  await same(pair, 'trusted intermediate, its CRL only (none for the root)', withCert(8447, 'chained', { headers: true }));
  await same(pair, 'depth 0, certificate of the CA', withCert(8448, 'direct'));
  await same(pair, 'depth 0, one intermediate sent by the client', withCert(8448, 'chained-int'));
  await same(pair, 'optional, expired', withCert(8444, 'expired', { headers: true }));
  const noCa = await same(pair, 'optional_no_ca, unknown issuer', withCert(8445, 'stranger'));
  assert.match(noCa.response!, /^FAILED:self-signed certificate\|CN=stranger\|CN=stranger\|/);
  await same(pair, 'optional_no_ca, expired', withCert(8445, 'expired', { headers: true }));
  await same(pair, 'optional_no_ca, none', withCert(8445, undefined));
});

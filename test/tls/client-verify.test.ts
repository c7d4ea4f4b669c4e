/**
 * Client certificates: `ssl_verify_client on|optional|optional_no_ca`,
 * `ssl_client_certificate` (also the CA names sent), `ssl_trusted_certificate`,
 * `ssl_verify_depth`, `ssl_crl`, nginx's 495/496 pages, and the
 * `$ssl_client_*` variables. Reference: Debian's nginx on the same
 * configuration for the variables (DN formats, serial, dates, verify text).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse, startNginx, nginxSkip } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { bodyOf, statusOf, tlsExchange } from './client.ts';

let certs: CertFactory;
let files: Record<string, Buffer>;

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-verify-')));
  certs.selfSigned('server');
  certs.selfSigned('root');
  certs.signed('int', 'root');
  certs.signed('client', 'int', { leaf: true, subject: '/C=US/O=Acme, Inc./OU=R\\+D/CN=J\u00f6rg #1+UID=7/' });
  certs.signed('direct', 'root', { leaf: true });
  certs.signed('revoked', 'int', { leaf: true });
  certs.selfSigned('stranger');
  certs.revoke('revoked', 'int');
  certs.crl('int.crl', 'int');
  certs.crl('root.crl', 'root');
  certs.concat('crls.pem', 'int.crl', 'root.crl');
  certs.concat('root-int.crt', 'root.crt', 'int.crt');
  certs.concat('client-int.crt', 'client.crt', 'int.crt');
  files = {};
  for (const f of fs.readdirSync(certs.dir)) if (/\.(crt|key|pem)$/.test(f)) files[f] = certs.read(f);
});
after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

const conf = `
events {}
http {
    ssl_certificate server.crt;
    ssl_certificate_key server.key;
    add_header X-Verify $ssl_client_verify always;
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        ssl_verify_client on;
        ssl_verify_depth 2;
        ssl_client_certificate root-int.crt;
        location / {
            return 200 "$ssl_client_verify|$ssl_client_s_dn|$ssl_client_i_dn|$ssl_client_s_dn_legacy|$ssl_client_serial|$ssl_client_v_start|$ssl_client_v_end|$ssl_client_fingerprint";
        }
    }
    server {
        listen 127.0.0.1:%%PORT_8444%% ssl;
        ssl_verify_client optional;
        ssl_client_certificate int.crt;
        ssl_trusted_certificate root.crt;
        location / { return 200 "$ssl_client_verify"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8445%% ssl;
        ssl_verify_client optional_no_ca;
        location / { return 200 "$ssl_client_verify"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8446%% ssl;
        ssl_verify_client on;
        ssl_verify_depth 0;
        ssl_client_certificate root-int.crt;
        location / { return 200 "$ssl_client_verify"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8447%% ssl;
        ssl_verify_client on;
        ssl_verify_depth 2;
        ssl_client_certificate root-int.crt;
        ssl_crl crls.pem;
        location / { return 200 "$ssl_client_verify"; }
    }
}
`;

const as = (name: string, chain = `${name}.crt`) => ({ cert: certs.read(chain), key: certs.read(`${name}.key`) });

for (const [name, start, skip] of [['gatehouse', startGatehouse, false], ['nginx', startNginx, nginxSkip]] as const) {
  test(`client certificate checks and $ssl_client_* (${name})`, { skip }, async (t) => {
    const srv = await start({ conf, files });
    t.after(() => srv.stop());
    const port = (n: number) => srv.port(n);

    const good = await tlsExchange(port(8443), as('client'));
    assert.equal(statusOf(good.data), 200);
    const [verify, sdn, idn, legacy, serial, vStart, vEnd, fingerprint] = bodyOf(good.data).split('|');
    assert.equal(verify, 'SUCCESS');
    // (openssl ca put CN first and UID in its own RDN)
    assert.equal(sdn, 'UID=7,OU=R\\+D,O=Acme\\, Inc.,C=US,CN=J\\C3\\B6rg #1');
    assert.equal(idn, 'CN=int');
    assert.equal(legacy, '/CN=J\\xC3\\xB6rg #1/C=US/O=Acme, Inc./OU=R\\+D/UID=7');
    assert.match(serial, /^[0-9A-F]+$/);
    assert.match(vStart, /^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4} GMT$/);
    assert.match(vEnd, /GMT$/);
    assert.match(fingerprint, /^[0-9a-f]{40}$/);

    // no certificate: 496; a certificate nobody trusts: 495
    const none = await tlsExchange(port(8443));
    assert.equal(statusOf(none.data), 400);
    assert.match(none.data.toString(), /No required SSL certificate was sent/);
    const stranger = await tlsExchange(port(8443), as('stranger'));
    assert.match(stranger.data.toString(), /400 The SSL certificate error[\s\S]*The SSL certificate error/);

    // optional: trusted-only roots verify too; optional_no_ca lets CA errors through
    assert.equal(bodyOf((await tlsExchange(port(8444))).data), 'NONE');
    assert.equal(bodyOf((await tlsExchange(port(8444), as('direct'))).data), 'SUCCESS');
    assert.equal(statusOf((await tlsExchange(port(8444), as('stranger'))).data), 400);
    assert.equal(bodyOf((await tlsExchange(port(8445), as('stranger'))).data), 'FAILED:self-signed certificate');

    // ssl_verify_depth 0: a certificate signed by the root passes, one more level does not
    // (OpenSSL stops building the chain at the trusted intermediate, whose issuer is then missing)
    assert.equal(bodyOf((await tlsExchange(port(8446), as('direct'))).data), 'SUCCESS');
    assert.match((await tlsExchange(port(8446), as('client'))).data.toString(), /X-Verify: FAILED:unable to get issuer certificate/);

    // ssl_crl: a revoked certificate fails, others pass
    assert.equal(bodyOf((await tlsExchange(port(8447), as('client'))).data), 'SUCCESS');
    assert.match((await tlsExchange(port(8447), as('revoked'))).data.toString(), /X-Verify: FAILED:certificate revoked/);
  });
}

test('the CA names sent are those of ssl_client_certificate, not ssl_trusted_certificate', async (t) => {
  const srv = await startGatehouse({ conf, files });
  t.after(() => srv.stop());
  const { execFileSync } = await import('node:child_process');
  const out = execFileSync('openssl', ['s_client', '-connect', `127.0.0.1:${srv.port(8444)}`], { input: '', stdio: ['pipe', 'pipe', 'ignore'] }).toString();
  const names = out.split('Acceptable client certificate CA names\n')[1]?.split(/\n(?!CN)/)[0];
  assert.equal(names?.trim(), 'CN = int');
});

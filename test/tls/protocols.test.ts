/**
 * `ssl_protocols`, `ssl_ciphers`, `ssl_prefer_server_ciphers`,
 * `ssl_ecdh_curve`, `ssl_dhparam` and the variables that show what was
 * negotiated. Reference: Debian's nginx gives the same variables for the
 * same client (explicit groups: the two OpenSSL versions differ in defaults).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse, startNginx, nginxSkip } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { bodyOf, tlsExchange } from './client.ts';

let certs: CertFactory;
let files: Record<string, Buffer>;

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-proto-')));
  certs.selfSigned('localhost');
  execFileSync('openssl', ['genpkey', '-genparam', '-algorithm', 'DH', '-pkeyopt', 'group:ffdhe2048', '-out', certs.file('dh.pem')], { stdio: 'ignore' });
  files = { 'localhost.crt': certs.read('localhost.crt'), 'localhost.key': certs.read('localhost.key'), 'dh.pem': certs.read('dh.pem') };
});
after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

const conf = `
events {}
http {
    ssl_certificate localhost.crt;
    ssl_certificate_key localhost.key;
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ecdh_curve X25519:prime256v1:secp384r1;
        location / { return 200 "$ssl_protocol|$ssl_cipher|$ssl_curve|$ssl_curves|$ssl_ciphers|$ssl_session_reused"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8444%% ssl;
        ssl_protocols TLSv1.2;
        ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384;
        ssl_prefer_server_ciphers on;
        ssl_ecdh_curve secp384r1:prime256v1;
        location / { return 200 "$ssl_protocol|$ssl_cipher|$ssl_curve"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8445%% ssl;
        ssl_protocols TLSv1.2;
        ssl_ciphers DHE-RSA-AES256-GCM-SHA384;
        ssl_dhparam dh.pem;
        location / { return 200 "$ssl_protocol|$ssl_cipher"; }
    }
}
`;

for (const [name, start, skip] of [['gatehouse', startGatehouse, false], ['nginx', startNginx, nginxSkip]] as const) {
  test(`negotiated protocol, cipher and group, and the client's lists (${name})`, { skip }, async (t) => {
    const srv = await start({ conf, files });
    t.after(() => srv.stop());
    const client = {
      ecdhCurve: 'prime256v1:X25519',
      ciphers: 'TLS_AES_128_GCM_SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256',
    };
    const tls13 = bodyOf((await tlsExchange(srv.port(8443), client)).data).split('|');
    assert.deepEqual(tls13.slice(0, 3), ['TLSv1.3', 'TLS_AES_128_GCM_SHA256', 'prime256v1']);
    assert.equal(tls13[3], 'prime256v1:X25519');
    assert.match(tls13[4], /^TLS_AES_128_GCM_SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256(:TLS_EMPTY_RENEGOTIATION_INFO_SCSV)?$/);
    assert.equal(tls13[5], '.');

    // the server's order wins with ssl_prefer_server_ciphers; the group too
    const tls12 = bodyOf((await tlsExchange(srv.port(8444), { ...client, ecdhCurve: 'prime256v1:secp384r1' })).data);
    assert.equal(tls12, 'TLSv1.2|ECDHE-RSA-AES128-GCM-SHA256|secp384r1');
    // a TLS 1.3-only client cannot connect to a TLS 1.2-only server
    assert.ok((await tlsExchange(srv.port(8444), { minVersion: 'TLSv1.3' })).error);

    const dhe = bodyOf((await tlsExchange(srv.port(8445), { ciphers: 'DHE-RSA-AES256-GCM-SHA384', maxVersion: 'TLSv1.2' })).data);
    assert.equal(dhe, 'TLSv1.2|DHE-RSA-AES256-GCM-SHA384');
  });
}

/**
 * SNI against nginx: Gatehouse and Debian's nginx run the same
 * configuration and every client sees the same thing from both — server
 * blocks by exact, wildcard and regex names, certificates named by
 * `$ssl_server_name` (a missing file fails the handshake, with nginx's
 * log line), no SNI and unknown SNI, `ssl_reject_handshake` in the default
 * server, RSA and ECDSA certificates in one server chosen by the client's
 * signature algorithms, SNI and Host naming different servers, and the
 * connection variables.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startPair } from '../kit/pair.ts';
import { CertFactory } from './certs.ts';
import { exchange, same, waitLog } from './differential-kit.ts';

let certs: CertFactory;
let files: Record<string, Buffer>;

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-dsni-')));
  for (const name of ['default', 'exact', 'wild', 'regex', 'one.var.test', 'verify', 'ca']) certs.selfSigned(name);
  certs.selfSigned('dual-rsa');
  certs.selfSigned('dual-ec', { ec: true });
  files = {};
  for (const f of fs.readdirSync(certs.dir)) if (/\.(crt|key)$/.test(f)) files[f] = certs.read(f);
});
after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

const VARS = '"$server_name|$ssl_server_name|$ssl_protocol|$ssl_cipher|$ssl_session_reused|$https|$host\\n"';

function server(port: string, name: string, extra: string): string {
  return `
    server {
        listen 127.0.0.1:%%PORT_${port}%% ssl;
        server_name ${name};
        ${extra}
        location / { return 200 ${VARS}; }
    }`;
}

const conf = `
events {}
http {
    access_log off;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate default.crt;
    ssl_certificate_key default.key;

    server {
        listen 127.0.0.1:%%PORT_8443%% ssl default_server;
        ssl_reject_handshake on;
        location / { return 200 ${VARS}; }
    }
    ${server('8443', 'exact.test', 'ssl_certificate exact.crt; ssl_certificate_key exact.key;')}
    ${server('8443', '*.wild.test', 'ssl_certificate wild.crt; ssl_certificate_key wild.key;')}
    ${server('8443', '~^r\\d+\\.regex\\.test$', 'ssl_certificate regex.crt; ssl_certificate_key regex.key;')}
    ${server('8443', '.var.test', 'ssl_certificate $ssl_server_name.crt; ssl_certificate_key $ssl_server_name.key;')}
    ${server('8443', 'dual.test', 'ssl_certificate dual-rsa.crt; ssl_certificate_key dual-rsa.key; ssl_certificate dual-ec.crt; ssl_certificate_key dual-ec.key;')}
    ${server('8443', 'verify.test', 'ssl_certificate verify.crt; ssl_certificate_key verify.key; ssl_verify_client optional; ssl_client_certificate ca.crt;')}

    ${server('8444', 'default.test', '')}
    ${server('8444', 'exact.test', 'ssl_certificate exact.crt; ssl_certificate_key exact.key;')}
}
`;

const RSA_SIGALGS = 'rsa_pss_rsae_sha256:rsa_pkcs1_sha256';
const ECDSA_SIGALGS = 'ecdsa_secp256r1_sha256';

test('SNI selects server blocks and certificates as in nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const get = (servername: string | undefined, host: string, extra: object = {}) =>
    (srv: Parameters<Parameters<typeof same>[2]>[0]) => exchange(srv, 8443, { servername, request: `GET / HTTP/1.0\r\nHost: ${host}\r\n\r\n`, ...extra });

  for (const maxVersion of ['TLSv1.2', 'TLSv1.3'] as const) {
    const exact = await same(pair, `exact name, ${maxVersion}`, get('exact.test', 'exact.test', { maxVersion }));
    assert.equal(exact.cert, 'CN=exact');
    assert.match(exact.response!, new RegExp(`^exact\\.test\\|exact\\.test\\|${maxVersion.replace('.', '\\.')}\\|[A-Z0-9_-]+\\|\\.\\|on\\|exact\\.test\\n$`));
  }
  assert.equal((await same(pair, 'wildcard name', get('a.wild.test', 'a.wild.test'))).cert, 'CN=wild');
  assert.equal((await same(pair, 'regex name', get('r7.regex.test', 'r7.regex.test'))).cert, 'CN=regex');
  assert.equal((await same(pair, 'upper-case SNI', get('EXACT.test', 'exact.test'))).cert, 'CN=exact');

  // the default server rejects handshakes: no SNI and an unknown SNI get unrecognized_name (112)
  assert.equal((await same(pair, 'no SNI, rejecting default', get(undefined, 'exact.test'))).error, 'alert 112');
  assert.equal((await same(pair, 'unknown SNI, rejecting default', get('nope.test', 'exact.test'))).error, 'alert 112');

  // certificates named by $ssl_server_name: a name without files fails the handshake
  const one = await same(pair, 'variable certificate', get('one.var.test', 'one.var.test'));
  assert.equal(one.cert, 'CN=one.var.test');
  assert.equal((await same(pair, 'variable certificate, missing file', get('two.var.test', 'two.var.test'))).error, 'alert 80');
  const logged = await same(pair, 'log of the missing certificate', (srv) => waitLog(srv, /cannot load certificate/));
  assert.deepEqual(logged, ['[error] cannot load certificate "PREFIX/two.var.test.crt": BIO_new_file() failed (SSL: error:80000002:system library::'
    + 'No such file or directory:calling fopen(PREFIX/two.var.test.crt, r) error:10000080:BIO routines::no such file) while SSL handshaking, '
    + 'client: 127.0.0.1, server: 127.0.0.1:PORT_8443']);

  // RSA and ECDSA in one server: the client's signature algorithms choose
  for (const maxVersion of ['TLSv1.2', 'TLSv1.3'] as const) {
    assert.equal((await same(pair, `ECDSA sigalgs, ${maxVersion}`, get('dual.test', 'dual.test', { sigalgs: ECDSA_SIGALGS, maxVersion }))).keyType, 'ec');
    assert.equal((await same(pair, `RSA sigalgs, ${maxVersion}`, get('dual.test', 'dual.test', { sigalgs: RSA_SIGALGS, maxVersion }))).keyType, 'rsa');
  }
  assert.equal((await same(pair, 'default sigalgs', get('dual.test', 'dual.test'))).keyType, 'ec');

  // SNI and Host name different servers: Host picks the server; 421 when that server verifies clients
  const other = await same(pair, 'SNI exact, Host wildcard', get('exact.test', 'x.wild.test'));
  assert.equal(other.cert, 'CN=exact');
  assert.match(other.response!, /^\*\.wild\.test\|exact\.test\|/);
  const misdirected = await same(pair, 'SNI exact, Host of a verifying server', (srv) => exchange(srv, 8443,
    { servername: 'exact.test', request: 'GET / HTTP/1.0\r\nHost: verify.test\r\n\r\n' }, true));
  assert.match(misdirected.response!, /^HTTP\/1\.1 421 /);
  const unknownHost = await same(pair, 'SNI verify, Host unknown', get('verify.test', 'unknown.test'));
  assert.match(unknownHost.response!, /^\|verify\.test\|/, 'an unknown Host is served by the default server');
});

test('without ssl_reject_handshake the default server answers no SNI and unknown SNI', async (t) => {
  const pair = await startPair(t, { conf, files });
  const get = (servername: string | undefined, host: string) =>
    (srv: Parameters<Parameters<typeof same>[2]>[0]) => exchange(srv, 8444, { servername, request: `GET / HTTP/1.0\r\nHost: ${host}\r\n\r\n` });
  const none = await same(pair, 'no SNI', get(undefined, 'default.test'));
  assert.equal(none.cert, 'CN=default');
  assert.match(none.response!, /^default\.test\|\|/);
  const unknown = await same(pair, 'unknown SNI', get('nope.test', 'nope.test'));
  assert.equal(unknown.cert, 'CN=default');
  assert.match(unknown.response!, /^default\.test\|nope\.test\|/);
  assert.equal((await same(pair, 'known SNI', get('exact.test', 'exact.test'))).cert, 'CN=exact');
});

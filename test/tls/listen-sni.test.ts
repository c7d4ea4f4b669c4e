/**
 * `listen … ssl`: certificates chosen by SNI with server_name rules, the
 * request's server still chosen by Host, plain HTTP on a TLS port (497),
 * `ssl_reject_handshake`, several certificates per server (RSA and ECDSA,
 * picked by the client's signature algorithms), certificates named by
 * variables, `ssl_password_file`, and configuration errors. Reference:
 * Debian's nginx on the same configuration where noted.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse, startNginx, nginxSkip } from '../kit/server.ts';
import { rawRequest } from '../kit/client.ts';
import { CertFactory } from './certs.ts';
import { bodyOf, statusOf, tlsExchange } from './client.ts';
import { maskNameInBody } from '../kit/server-name.ts';

let certs: CertFactory;
let files: Record<string, Buffer>;

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-tls-')));
  for (const n of ['localhost', 'example.com', 'one', 'two']) certs.selfSigned(n);
  certs.selfSigned('ec', { ec: true });
  execOpenssl(certs.dir, ['genrsa', '-aes128', '-passout', 'pass:secret', '-out', 'pass.key', '2048']);
  execOpenssl(certs.dir, ['req', '-x509', '-new', '-key', 'pass.key', '-passin', 'pass:secret', '-config', 'openssl.conf', '-subj', '/CN=pass/', '-out', 'pass.crt']);
  files = {};
  for (const f of fs.readdirSync(certs.dir)) if (/\.(crt|key)$/.test(f)) files[f] = certs.read(f);
  files['password_file'] = Buffer.from('wrong\nsecret\n');
});

after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

function execOpenssl(cwd: string, args: string[]): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

const sniConf = `
events {}
http {
    ssl_protocols TLSv1.2 TLSv1.3;
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        error_page 497 =200 /497;
        location / { return 200 "$server_name:$ssl_server_name:$https:$scheme"; }
        location = /497 { return 200 "plain:$https"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8443%%;
        server_name example.com *.example.org;
        ssl_certificate example.com.crt;
        ssl_certificate_key example.com.key;
        location / { return 200 "$server_name:$ssl_server_name"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8444%% ssl;
        server_name localhost;
        ssl_certificate one.crt;
        ssl_certificate_key one.key;
        location / { return 200 "second"; }
    }
}
`;

// reference: Debian's nginx 1.22 gives the same certificates, bodies and 497 page
for (const [name, start, skip] of [['gatehouse', startGatehouse, false], ['nginx', startNginx, nginxSkip]] as const) {
  test(`SNI picks the certificate, Host picks the server (${name})`, { skip }, async (t) => {
    const srv = await start({ conf: sniConf, files });
    t.after(() => srv.stop());
    const port = srv.port(8443);

    const noSni = await tlsExchange(port);
    assert.match(noSni.peer!.subject, /CN=localhost/);
    assert.equal(bodyOf(noSni.data), 'localhost::on:https');

    const sni = await tlsExchange(port, { servername: 'example.com', request: 'GET / HTTP/1.0\r\nHost: example.com\r\n\r\n' });
    assert.match(sni.peer!.subject, /CN=example.com/);
    assert.equal(bodyOf(sni.data), 'example.com:example.com');

    const wildcard = await tlsExchange(port, { servername: 'a.example.org', request: 'GET / HTTP/1.0\r\nHost: a.example.org\r\n\r\n' });
    assert.match(wildcard.peer!.subject, /CN=example.com/);

    // unknown SNI: the default server's certificate; the Host header still picks the server
    const unknown = await tlsExchange(port, { servername: 'unknown.test', request: 'GET / HTTP/1.0\r\nHost: example.com\r\n\r\n' });
    assert.match(unknown.peer!.subject, /CN=localhost/);
    assert.equal(bodyOf(unknown.data), 'example.com:unknown.test');

    // plain HTTP on the TLS port: 497, handled by error_page
    const plain = await rawRequest(port, 'GET / HTTP/1.0\r\nHost: localhost\r\n\r\n');
    assert.match(plain.toString(), /^HTTP\/1\.1 200 OK/);
    assert.equal(bodyOf(plain), 'plain:');

    // the plain listener of the same server
    const http = await rawRequest(srv.port(8080), 'GET / HTTP/1.0\r\nHost: localhost\r\n\r\n');
    assert.equal(bodyOf(http), 'localhost:::http');
  });

  test(`plain HTTP on a TLS port gets nginx's 400 page (${name})`, { skip }, async (t) => {
    const srv = await start({ conf: sniConf.replace('error_page 497 =200 /497;', ''), files: { ...files } });
    t.after(() => srv.stop());
    const res = (await rawRequest(srv.port(8443), 'GET / HTTP/1.1\r\nHost: localhost\r\n\r\n')).toString('latin1');
    assert.match(res, /^HTTP\/1\.1 400 Bad Request\r\n/);
    assert.match(res, /Connection: close\r\n/);
    const body = maskNameInBody(res.slice(res.indexOf('\r\n\r\n') + 4));
    assert.equal(body, '<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n<body>\r\n'
      + '<center><h1>400 Bad Request</h1></center>\r\n<center>The plain HTTP request was sent to HTTPS port</center>\r\n'
      + '<hr><center>SERVER/V</center>\r\n</body>\r\n</html>\r\n');
  });
}

test('ssl_reject_handshake refuses with unrecognized_name; other names are served', async (t) => {
  const srv = await startGatehouse({
    conf: `
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        server_name localhost;
        ssl_reject_handshake on;
    }
    server {
        listen 127.0.0.1:%%PORT_8443%%;
        server_name virtual;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        location / { return 200 "virtual:$ssl_server_name"; }
    }
}
`, files,
  });
  t.after(() => srv.stop());
  const port = srv.port(8443);
  assert.match((await tlsExchange(port)).error ?? '', /unrecognized name/);
  assert.match((await tlsExchange(port, { servername: 'other' })).error ?? '', /unrecognized name/);
  const ok = await tlsExchange(port, { servername: 'virtual', request: 'GET / HTTP/1.0\r\nHost: virtual\r\n\r\n' });
  assert.equal(ok.error, undefined);
  assert.equal(bodyOf(ok.data), 'virtual:virtual');
});

test('RSA and ECDSA certificates in one server: the client signature algorithms choose', async (t) => {
  const srv = await startGatehouse({
    conf: `
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        ssl_certificate ec.crt;
        ssl_certificate_key ec.key;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        location / { return 200 "$ssl_protocol"; }
    }
}
`, files,
  });
  t.after(() => srv.stop());
  const rsa = await tlsExchange(srv.port(8443), { sigalgs: 'rsa_pss_rsae_sha256:rsa_pkcs1_sha256' });
  assert.match(rsa.peer!.subject, /CN=localhost/);
  const ec = await tlsExchange(srv.port(8443), { sigalgs: 'ecdsa_secp256r1_sha256' });
  assert.match(ec.peer!.subject, /CN=ec/);
});

test('certificates named by variables are loaded per handshake; a missing file fails the handshake', async (t) => {
  const srv = await startGatehouse({
    conf: `
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        server_name localhost;
        ssl_certificate $ssl_server_name.crt;
        ssl_certificate_key $ssl_server_name.key;
        location / { return 200 "$ssl_server_name"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8444%% ssl;
        server_name localhost;
        ssl_certificate pass.crt;
        ssl_certificate_key pass.key;
        ssl_password_file password_file;
        location / { return 200 "pass"; }
    }
}
`, files,
  });
  t.after(() => srv.stop());
  const one = await tlsExchange(srv.port(8443), { servername: 'one' });
  assert.match(one.peer!.subject, /CN=one/);
  assert.equal(bodyOf(one.data), 'one');
  const two = await tlsExchange(srv.port(8443), { servername: 'two' });
  assert.match(two.peer!.subject, /CN=two/);
  const nx = await tlsExchange(srv.port(8443), { servername: 'nx' });
  assert.ok(nx.error, 'no certificate, no handshake');
  assert.equal(nx.peer, undefined);
  await srv.waitForLog('error.log', /\[error\].*cannot load certificate ".*nx\.crt".*while SSL handshaking/);

  const pass = await tlsExchange(srv.port(8444));
  assert.match(pass.peer!.subject, /CN=pass/);
  assert.equal(statusOf(pass.data), 200);
});

test('the obsolete `ssl on` makes the server\'s address speak TLS, with nginx 1.22\'s warning', async (t) => {
  const srv = await startGatehouse({
    conf: `
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8443%%;
        ssl on;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        location / { return 200 "$https"; }
    }
}
`, files,
  });
  t.after(() => srv.stop());
  const r = await tlsExchange(srv.port(8443));
  assert.equal(bodyOf(r.data), 'on');
  assert.match(srv.readFile('error.log').toString(), /\[warn\] .*the "ssl" directive is deprecated, use the "listen \.\.\. ssl" directive instead in .*nginx\.conf:6/);
});

test('configuration errors use nginx wording', async () => {
  const cases: Array<[string, RegExp]> = [
    ['ssl_certificate nx.crt; ssl_certificate_key nx.key;', /\[emerg\] cannot load certificate ".*\/nx\.crt": BIO_new_file\(\) failed/],
    ['', /\[emerg\] no "ssl_certificate" is defined for the "listen \.\.\. ssl" directive in .*nginx\.conf:\d+/],
    ['ssl_certificate localhost.crt;', /\[emerg\] no "ssl_certificate_key" is defined for certificate ".*localhost\.crt"/],
  ];
  for (const [directives, expected] of cases) {
    const conf = `events {}\nhttp {\n    server {\n        listen 127.0.0.1:%%PORT_8443%% ssl;\n        ${directives}\n    }\n}\n`;
    await assert.rejects(startGatehouse({ conf, files }), (err: Error) => {
      assert.match(err.message, expected);
      return true;
    });
  }
});

/**
 * HTTPS upstreams: proxy_pass https://, SNI with proxy_ssl_server_name and
 * proxy_ssl_name, proxy_ssl_verify against proxy_ssl_trusted_certificate
 * (chain and name, with nginx's log lines), client certificates with
 * proxy_ssl_certificate/_key, proxy_ssl_crl, and session reuse. The upstream is a
 * node:tls server that reports what it saw of each handshake.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { parseResponse, rawRequest } from '../kit/client.ts';
import { startGatehouse } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON } from './upstream-kit.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-tls-'));
let server: tls.Server;
let port: number;
let gh: RunningServer;

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** A CA, a server certificate for upstream.example (signed by it) and a client certificate. */
function makeCerts(): void {
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=test ca');
  for (const [name, cn, san] of [['server', 'upstream.example', 'DNS:upstream.example,DNS:*.wild.example'], ['client', 'client one', ''], ['client2', 'client two', '']]) {
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
    const ext = path.join(dir, `${name}.ext`);
    fs.writeFileSync(ext, san ? `subjectAltName=${san}\n` : 'basicConstraints=CA:FALSE\n');
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', '-extfile', ext);
  }
  // CRLs from the CA: one revoking nothing, one revoking the server's certificate
  fs.writeFileSync(path.join(dir, 'ca.conf'), `[ca]\ndefault_ca = myca\n[myca]\ndatabase = ${dir}/index.txt\ndefault_md = sha256\n`);
  fs.writeFileSync(path.join(dir, 'index.txt'), '');
  const ca = ['-config', 'ca.conf', '-keyfile', 'ca.key', '-cert', 'ca.crt'];
  openssl('ca', '-gencrl', ...ca, '-crldays', '1', '-out', 'empty.crl');
  openssl('ca', '-revoke', 'server.crt', ...ca);
  openssl('ca', '-gencrl', ...ca, '-crldays', '1', '-out', 'revoked.crl');
  // two CRLs in one file, another CA's first: the second must be read too
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'other.key', '-out', 'other.crt', '-days', '2', '-subj', '/CN=other ca');
  openssl('ca', '-gencrl', '-config', 'ca.conf', '-keyfile', 'other.key', '-cert', 'other.crt', '-crldays', '1', '-out', 'other.crl');
  fs.writeFileSync(path.join(dir, 'both.crl'), fs.readFileSync(path.join(dir, 'other.crl'), 'latin1') + fs.readFileSync(path.join(dir, 'empty.crl'), 'latin1'));
  fs.chmodSync(dir, 0o755);
  for (const f of fs.readdirSync(dir)) fs.chmodSync(path.join(dir, f), 0o644);
}

before(async () => {
  makeCerts();
  server = tls.createServer({
    key: fs.readFileSync(path.join(dir, 'server.key')),
    cert: fs.readFileSync(path.join(dir, 'server.crt')),
    ca: fs.readFileSync(path.join(dir, 'ca.crt')),
    requestCert: true,
    rejectUnauthorized: false,
    minVersion: 'TLSv1.2',
  }, (socket) => {
    socket.once('data', () => {
      const peer = socket.getPeerCertificate();
      const info = `sni=${(socket as unknown as { servername?: string | false }).servername || '-'}`
        + ` cert=${peer?.subject?.CN ?? '-'} reused=${socket.isSessionReused()} proto=${socket.getProtocol()}`;
      socket.end(`HTTP/1.1 200 OK\r\nContent-Length: ${info.length}\r\nConnection: close\r\n\r\n${info}`);
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  port = (server.address() as { port: number }).port;
  gh = await startGatehouse({ conf: `
events {}
http {
${HTTP_COMMON}
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location /plain/ { proxy_pass https://127.0.0.1:${port}/; proxy_ssl_session_reuse off; }
        location /sni/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_server_name on;
            proxy_ssl_name upstream.example;
            proxy_ssl_session_reuse off;
        }
        location /verify/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_verify on;
            proxy_ssl_name upstream.example;
            proxy_ssl_trusted_certificate ${dir}/ca.crt;
        }
        location /wildcard/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_verify on;
            proxy_ssl_name foo.wild.example;
            proxy_ssl_trusted_certificate ${dir}/ca.crt;
        }
        location /mismatch/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_verify on;
            proxy_ssl_name other.example;
            proxy_ssl_trusted_certificate ${dir}/ca.crt;
        }
        location /untrusted/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_verify on;
            proxy_ssl_name upstream.example;
            proxy_ssl_trusted_certificate ${dir}/client.crt;
            # a session made by /verify/ would be resumed, its check included (as in nginx)
            proxy_ssl_session_reuse off;
        }
        location /crl-empty/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_verify on;
            proxy_ssl_name upstream.example;
            proxy_ssl_trusted_certificate ${dir}/ca.crt;
            proxy_ssl_crl ${dir}/empty.crl;
            proxy_ssl_session_reuse off;
        }
        location /crl-revoked/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_verify on;
            proxy_ssl_name upstream.example;
            proxy_ssl_trusted_certificate ${dir}/ca.crt;
            proxy_ssl_crl ${dir}/revoked.crl;
            proxy_ssl_session_reuse off;
        }
        location /crl-both/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_verify on;
            proxy_ssl_name upstream.example;
            proxy_ssl_trusted_certificate ${dir}/ca.crt;
            proxy_ssl_crl ${dir}/both.crl;
            proxy_ssl_session_reuse off;
        }
        location /varcert/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_certificate ${dir}/$arg_c.crt;
            proxy_ssl_certificate_key ${dir}/$arg_c.key;
            proxy_ssl_session_reuse off;
        }
        location /cachedcert/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_certificate ${dir}/$arg_c.crt;
            proxy_ssl_certificate_key ${dir}/$arg_c.key;
            proxy_ssl_certificate_cache max=4;
            proxy_ssl_session_reuse off;
        }
        location /client/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_certificate ${dir}/client.crt;
            proxy_ssl_certificate_key ${dir}/client.key;
            proxy_ssl_session_reuse off;
        }
        location /reuse/ { proxy_pass https://127.0.0.1:${port}/; }
        location /tls12/ {
            proxy_pass https://127.0.0.1:${port}/;
            proxy_ssl_protocols TLSv1.2;
            proxy_ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256;
            proxy_ssl_session_reuse off;
        }
    }
}
` });
});

after(async () => {
  await gh.stop();
  await new Promise((res) => server.close(res));
  fs.rmSync(dir, { recursive: true, force: true });
});

async function get(uri: string): Promise<{ status: number; body: string }> {
  const r = parseResponse(await rawRequest(gh.port(8080), `GET ${uri} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`));
  return { status: r.status, body: r.body.toString() };
}

test('proxy_pass https://: no SNI by default, no verification', async () => {
  assert.deepEqual(await get('/plain/'), { status: 200, body: 'sni=- cert=- reused=false proto=TLSv1.3' });
});

test('proxy_ssl_server_name and proxy_ssl_name set the SNI', async () => {
  assert.equal((await get('/sni/')).body, 'sni=upstream.example cert=- reused=false proto=TLSv1.3');
});

test('proxy_ssl_verify: trusted chain and matching name (wildcards too) pass', async () => {
  assert.equal((await get('/verify/')).status, 200);
  assert.equal((await get('/wildcard/')).status, 200);
});

test('proxy_ssl_verify: a name mismatch or an untrusted chain is 502 with nginx\'s log line', async () => {
  assert.equal((await get('/mismatch/')).status, 502);
  assert.match(await gh.waitForLog('error.log', /does not match/), /\[error\] .*upstream SSL certificate does not match "other\.example" while SSL handshaking to upstream, client: 127\.0\.0\.1/);
  assert.equal((await get('/untrusted/')).status, 502);
  assert.match(await gh.waitForLog('error.log', /verify error/), /\[error\] .*upstream SSL certificate verify error: \(\d+:[^)]+\) while SSL handshaking to upstream/);
});

test('proxy_ssl_crl: a revoked upstream certificate is 502 with OpenSSL\'s reason; every CRL of the file counts', async () => {
  assert.equal((await get('/crl-empty/')).status, 200);
  assert.equal((await get('/crl-revoked/')).status, 502);
  assert.equal((await get('/crl-both/')).status, 200);
  assert.match(await gh.waitForLog('error.log', /revoked/), /\[error\] .*upstream SSL certificate verify error: \(23:certificate revoked\) while SSL handshaking to upstream/);
});

test('proxy_ssl_certificate: the upstream sees the client certificate', async () => {
  assert.equal((await get('/client/')).body, 'sni=- cert=client one reused=false proto=TLSv1.3');
});

test('a certificate path with variables is read for each connection, unless proxy_ssl_certificate_cache keeps it', async () => {
  const use = (name: string, from: string) => {
    for (const ext of ['crt', 'key']) fs.copyFileSync(path.join(dir, `${from}.${ext}`), path.join(dir, `${name}.${ext}`));
  };
  use('v', 'client');
  use('w', 'client');
  assert.match((await get('/varcert/?c=v')).body, /cert=client one /);
  assert.match((await get('/cachedcert/?c=w')).body, /cert=client one /);
  use('v', 'client2');
  use('w', 'client2');
  assert.match((await get('/varcert/?c=v')).body, /cert=client two /);
  assert.match((await get('/cachedcert/?c=w')).body, /cert=client one /, 'still the cached one');
  // nginx loads the key first: a missing pair is reported by its key, with a 500
  assert.equal((await get('/varcert/?c=missing')).status, 500);
  assert.match(await gh.waitForLog('error.log', /cannot load/), new RegExp(`\\[error\\] .*cannot load certificate key "${dir}/missing\\.key": `));
});

test('proxy_ssl_protocols and proxy_ssl_ciphers', async () => {
  assert.match((await get('/tls12/')).body, /proto=TLSv1\.2$/);
});

test('proxy_ssl_session_reuse (on by default): the next connection resumes the session', async () => {
  await get('/reuse/');
  let reused = false;
  // TLS 1.3 tickets arrive after the first response; a couple of tries allow for that
  for (let i = 0; i < 3 && !reused; i++) reused = (await get('/reuse/')).body.includes('reused=true');
  assert.ok(reused, 'a later connection resumed the TLS session');
});

/**
 * Each TLS file a configuration names is read once per configuration load
 * (nginx ≥ 1.27.2's SSL object cache), however many directives and server
 * blocks name it, in http, stream and proxy_ssl_*: every file here is a
 * FIFO that gives its content to the first reader only, and two workers
 * serve it. A reload reads them again. (Debian's nginx 1.22 reads a file for
 * every directive naming it, so this runs against Gatehouse alone.)
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { bodyOf, tlsExchange } from './client.ts';

let certs: CertFactory;
const NAMES = ['root.crt', 'root.crl', 'a.test.crt', 'a.test.key', 'client.crt', 'client.key'];

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-tlsfiles-')));
  certs.selfSigned('root');
  certs.signed('a.test', 'root', { leaf: true });
  certs.signed('client', 'root', { leaf: true });
  certs.crl('root.crl', 'root');
  for (const n of NAMES) execFileSync('mkfifo', [certs.file(`${n}.fifo`)]);
});
after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

/** Writers that give each FIFO its file once, then end of file to every later reader (as nginx-tests' ssl_cache.t). */
function serveFifos(): ChildProcess[] {
  return NAMES.map((n) => spawn('sh', ['-c', 'cat "$1" > "$2"; while :; do : > "$2"; done', 'sh', certs.file(n), certs.file(`${n}.fifo`)], { stdio: 'ignore' }));
}

function stopWriters(writers: ChildProcess[]): Promise<unknown> {
  return Promise.all(writers.map((w) => new Promise((resolve) => {
    if (w.exitCode !== null || w.signalCode !== null) return resolve(undefined);
    w.once('exit', resolve);
    w.kill('SIGKILL');
  })));
}

const f = (name: string) => certs.file(`${name}.fifo`);

const conf = () => `
worker_processes 2;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        ssl_certificate ${f('a.test.crt')};
        ssl_certificate_key ${f('a.test.key')};
        ssl_trusted_certificate ${f('root.crt')};
        ssl_crl ${f('root.crl')};
        location / { return 200 "one\\n"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8444%% ssl;
        ssl_certificate ${f('a.test.crt')};
        ssl_certificate_key ${f('a.test.key')};
        ssl_verify_client on;
        ssl_client_certificate ${f('root.crt')};
        ssl_crl ${f('root.crl')};
        location / { return 200 "$ssl_client_verify:$ssl_client_s_dn\\n"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / {
            proxy_pass https://127.0.0.1:%%PORT_8444%%;
            proxy_ssl_certificate ${f('client.crt')};
            proxy_ssl_certificate_key ${f('client.key')};
            proxy_ssl_name a.test;
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate ${f('root.crt')};
            proxy_ssl_crl ${f('root.crl')};
        }
    }
}
stream {
    server {
        listen 127.0.0.1:%%PORT_8445%% ssl;
        ssl_certificate ${f('a.test.crt')};
        ssl_certificate_key ${f('a.test.key')};
        ssl_verify_client on;
        ssl_client_certificate ${f('root.crt')};
        ssl_crl ${f('root.crl')};
        return "$ssl_client_verify:$ssl_client_s_dn\\n";
    }
}
`;

/** What clients see on every address, a few times over (both workers take connections; the proxy loads its files on first use). */
async function serveAll(port: (n: number) => number): Promise<void> {
  const client = { cert: certs.read('client.crt'), key: certs.read('client.key') };
  for (let i = 0; i < 4; i++) {
    const one = await tlsExchange(port(8443), { servername: 'a.test', ca: certs.read('root.crt'), rejectUnauthorized: true });
    assert.equal(one.error, undefined);
    assert.equal(bodyOf(one.data), 'one\n');
    assert.equal(bodyOf((await tlsExchange(port(8444), client)).data), 'SUCCESS:CN=client\n');
    const proxied = await fetch(`http://127.0.0.1:${port(8080)}/`);
    assert.equal(await proxied.text(), 'SUCCESS:CN=client\n', 'proxy_ssl_certificate and proxy_ssl_trusted_certificate from the FIFOs');
    const streamed = await tlsExchange(port(8445), { ...client, request: '' });
    assert.equal(streamed.data.toString(), 'SUCCESS:CN=client\n');
  }
}

test('TLS files are read once per configuration load, in http, stream and proxy_ssl', async (t) => {
  let writers = serveFifos();
  t.after(() => stopWriters(writers));
  const srv = await startGatehouse({ conf: conf() });
  t.after(() => srv.stop());
  await serveAll((n) => srv.port(n));
  // a reload reads every file again, once
  await stopWriters(writers);
  writers = serveFifos();
  const log = await srv.reload();
  assert.doesNotMatch(log, /\[emerg\]/);
  await serveAll((n) => srv.port(n));
});

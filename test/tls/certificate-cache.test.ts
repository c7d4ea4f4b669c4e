/**
 * `ssl_certificate_cache` for certificates named by variables, counted as
 * nginx ≥ 1.27.4 counts it: the certificate file and the key file are one
 * entry each, so `max=4` holds two pairs, and the least recently used entry
 * goes first; `off` reads the files at every handshake. (Debian's nginx 1.22
 * has no such directive: Gatehouse alone.)
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { tlsExchange } from './client.ts';

let certs: CertFactory;

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-certcache-')));
  for (const n of ['1.test', '2.test', '3.test', '4.test', 'other']) certs.selfSigned(n);
});
after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

const conf = () => `
events {}
http {
    error_log %%PREFIX%%/info.log info;
    access_log off;
    ssl_certificate ${certs.dir}/$ssl_server_name.crt;
    ssl_certificate_key ${certs.dir}/$ssl_server_name.key;
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        ssl_certificate_cache max=4;
        location / { return 200 ok; }
    }
    server {
        listen 127.0.0.1:%%PORT_8444%% ssl;
        ssl_certificate_cache off;
        location / { return 200 ok; }
    }
}
`;

/** The subject of the certificate served for `name`, or the handshake's error. */
async function served(port: number, name: string): Promise<string> {
  const x = await tlsExchange(port, { servername: name });
  return x.error ? 'refused' : x.peer!.subject.replace(/\n/g, ',');
}

/** Takes `name`'s files away (its pair can then come from the cache only). */
function remove(name: string): void {
  for (const ext of ['crt', 'key']) fs.rmSync(certs.file(`${name}.${ext}`));
}

test('ssl_certificate_cache max=4 keeps two pairs, the least recently used leaves first', async (t) => {
  const srv = await startGatehouse({ conf: conf() });
  t.after(() => srv.stop());
  const port = srv.port(8443);
  assert.equal(await served(port, '1.test'), 'CN=1.test');
  remove('1.test');
  assert.equal(await served(port, '1.test'), 'CN=1.test', 'from the cache');
  assert.equal(await served(port, '2.test'), 'CN=2.test');
  // the fifth and sixth entries push out 1.test's certificate and key
  assert.equal(await served(port, '3.test'), 'CN=3.test');
  assert.equal(await served(port, '1.test'), 'refused');
  await srv.waitForLog('info.log', /\[error\] .*cannot load certificate ".*\/1\.test\.crt": BIO_new_file\(\) failed/);
  remove('2.test');
  assert.equal(await served(port, '2.test'), 'CN=2.test', 'still cached');
});

test('ssl_certificate_cache off reads the files at every handshake', async (t) => {
  const srv = await startGatehouse({ conf: conf() });
  t.after(() => srv.stop());
  const port = srv.port(8444);
  assert.equal(await served(port, '4.test'), 'CN=4.test');
  for (const ext of ['crt', 'key']) fs.copyFileSync(certs.file(`other.${ext}`), certs.file(`4.test.${ext}`));
  assert.equal(await served(port, '4.test'), 'CN=other');
});

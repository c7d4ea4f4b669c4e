/**
 * OCSP stapling against nginx: `ssl_stapling_file` (stapled as stored, only
 * to clients asking for status), and `ssl_stapling_verify` with responses
 * from a responder — one signed by the issuer, one by a key nobody trusts
 * (not stapled, nginx's error line). Gatehouse and Debian's nginx run the
 * same configuration; responses are made with `openssl ocsp`.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { startPair } from '../kit/pair.ts';
import { freePort } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { tlsExchange } from './client.ts';
import { same, waitLog } from './differential-kit.ts';

let certs: CertFactory;
let files: Record<string, Buffer>;
let responder: http.Server;
let responderPort: number;

before(async () => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-dstaple-')));
  certs.selfSigned('root');
  certs.selfSigned('rogue');
  certs.signed('end', 'root', { leaf: true });
  certs.concat('end-root.crt', 'end.crt', 'root.crt');
  certs.ocspResponse('good.der', 'end', 'root');
  certs.ocspResponse('bad.der', 'end', 'root', 'rogue');
  files = {};
  for (const f of fs.readdirSync(certs.dir)) if (/\.(crt|key|der)$/.test(f)) files[f] = certs.read(f);
  // the responder answers /good/… and /bad/… with the stored responses, whatever was asked
  responderPort = await freePort();
  responder = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'application/ocsp-response' });
      res.end(certs.read(req.url?.startsWith('/bad/') ? 'bad.der' : 'good.der'));
    });
  });
  await new Promise<void>((r) => responder.listen(responderPort, '127.0.0.1', r));
});
after(async () => {
  await new Promise((r) => responder.close(r));
  fs.rmSync(certs.dir, { recursive: true, force: true });
});

function conf(): string {
  const server = (port: string, extra: string) => `
    server {
        listen 127.0.0.1:%%PORT_${port}%% ssl;
        ssl_certificate end-root.crt;
        ssl_certificate_key end.key;
        ssl_stapling on;
        ${extra}
        location / { return 200 "ok"; }
    }`;
  return `
events {}
http {
    access_log off;
    ssl_protocols TLSv1.2 TLSv1.3;
    ${server('8443', 'ssl_stapling_file good.der;')}
    ${server('8444', 'ssl_stapling_file bad.der; ssl_stapling_verify on; ssl_trusted_certificate root.crt;')}
    ${server('8445', `ssl_stapling_responder http://127.0.0.1:${responderPort}/good/; ssl_stapling_verify on; ssl_trusted_certificate root.crt;`)}
    ${server('8446', `ssl_stapling_responder http://127.0.0.1:${responderPort}/bad/; ssl_stapling_verify on; ssl_trusted_certificate root.crt;`)}
}
`;
}

/** The stapled response (as hex, for comparing) of one handshake, or '' when none. */
async function staple(srv: RunningServer, port: number, requestOCSP: boolean, maxVersion: 'TLSv1.2' | 'TLSv1.3' = 'TLSv1.3'): Promise<string> {
  const x = await tlsExchange(srv.port(port), { requestOCSP, maxVersion });
  assert.equal(x.error, undefined);
  return x.ocsp?.toString('hex') ?? '';
}

test('ssl_stapling_file and ssl_stapling_verify, as nginx', async (t) => {
  const pair = await startPair(t, { conf: conf(), files });
  const good = certs.read('good.der').toString('hex');
  for (const v of ['TLSv1.2', 'TLSv1.3'] as const) {
    assert.equal(await same(pair, `file, status asked, ${v}`, (srv) => staple(srv, 8443, true, v)), good);
  }
  assert.equal(await same(pair, 'file, status not asked', (srv) => staple(srv, 8443, false)), '');
  // a stored response is stapled as it is, even with ssl_stapling_verify
  await same(pair, 'file signed by another key, verify on', (srv) => staple(srv, 8444, true));

  // from the responder: the first handshake starts the fetch, later ones get the staple (or not)
  await same(pair, 'responder, first handshake', (srv) => staple(srv, 8445, true));
  await same(pair, 'responder signed by another key, first handshake', (srv) => staple(srv, 8446, true));
  const logged = await same(pair, 'log of the response that does not verify', (srv) => waitLog(srv, /OCSP_basic_verify/));
  assert.equal(logged.length, 1);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await same(pair, 'responder, later handshake', (srv) => staple(srv, 8445, true)), good);
  assert.equal(await same(pair, 'responder signed by another key, later handshake', (srv) => staple(srv, 8446, true)), '');
});

// Certificate profiles (draft-ietf-acme-profiles): Debian's pebble predates
// them, so a small fake ACME server of our own announces profiles, records
// what each newOrder asked for, and signs the CSR with openssl.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse, freePorts } from '../kit/server.ts';
import { servedCertificate, waitFor } from './pebble.ts';

interface FakeCa { url: string; orders: Array<{ identifiers: unknown; profile?: string }>; stop(): Promise<void> }

/** Just enough ACME for an order whose authorizations are already valid; JWS signatures are not checked. */
async function startFakeCa(profiles: Record<string, string>): Promise<FakeCa> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-acme-fakeca-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', path.join(dir, 'ca.key'), '-out', path.join(dir, 'ca.pem'), '-days', '2', '-subj', '/CN=Fake ACME CA'], { stdio: 'ignore' });
  const orders: FakeCa['orders'] = [];
  const certs = new Map<number, string>();
  let nonce = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const headers: Record<string, string> = { 'replay-nonce': `n${++nonce}`, 'content-type': 'application/json' };
      const payload = body ? JSON.parse(Buffer.from((JSON.parse(body) as { payload: string }).payload, 'base64url').toString() || 'null') as Record<string, unknown> | null : null;
      const send = (status: number, value: unknown, extra: Record<string, string> = {}) => res.writeHead(status, { ...headers, ...extra }).end(typeof value === 'string' ? value : JSON.stringify(value));
      const m = /^\/(\w+)(?:\/(\d+))?$/.exec(req.url ?? '') ?? [];
      const id = Number(m[2]);
      const order = (n: number) => ({
        status: certs.has(n) ? 'valid' : 'ready', identifiers: orders[n].identifiers, authorizations: [],
        finalize: `${base}/finalize/${n}`, certificate: certs.has(n) ? `${base}/cert/${n}` : undefined,
      });
      switch (m[1]) {
        case 'dir': return send(200, { newNonce: `${base}/nonce`, newAccount: `${base}/account`, newOrder: `${base}/neworder`, meta: { profiles } });
        case 'nonce': return send(200, '');
        case 'account': return send(201, { status: 'valid' }, { location: `${base}/acct/1` });
        case 'neworder':
          orders.push({ identifiers: payload!.identifiers, profile: payload!.profile as string | undefined });
          return send(201, order(orders.length - 1), { location: `${base}/order/${orders.length - 1}` });
        case 'order': return send(200, order(id));
        case 'finalize': {
          const csr = path.join(dir, `${id}.csr`);
          fs.writeFileSync(csr, Buffer.from(payload!.csr as string, 'base64url'));
          const pem = execFileSync('openssl', ['x509', '-req', '-inform', 'DER', '-in', csr, '-CA', path.join(dir, 'ca.pem'), '-CAkey', path.join(dir, 'ca.key'),
            '-days', '1', '-copy_extensions', 'copy', '-set_serial', String(1000 + id)], { encoding: 'latin1' });
          certs.set(id, pem);
          return send(200, order(id));
        }
        case 'cert': return send(200, certs.get(id)!, { 'content-type': 'application/pem-certificate-chain' });
      }
      send(404, { type: 'urn:ietf:params:acme:error:malformed' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/dir`, orders,
    stop: async () => {
      await new Promise<void>((r) => server.close(() => r()));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

test('profile: asked for when the CA offers it, left out (with a notice) when it does not, always asked for with require', { timeout: 60_000 }, async (t) => {
  const ca = await startFakeCa({ shortlived: 'https://ca.test/docs#shortlived', classic: 'https://ca.test/docs#classic' });
  t.after(() => ca.stop());
  const [tlsPort] = await freePorts(1);
  const server = (name: string, issuer: string) => `
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name ${name};
        acme_certificate ${issuer};
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }`;
  const issuer = (name: string, profile: string) => `acme_issuer ${name} { uri ${ca.url}; profile ${profile}; state_path off; }`;
  const srv = await startGatehouse({
    conf: `
events {}
http {
    ${issuer('offered', 'shortlived')}
    ${issuer('missing', 'tlsserver')}
    ${issuer('required', 'tlsserver require')}
    ${server('offered.test', 'offered')}
    ${server('missing.test', 'missing')}
    ${server('required.test', 'required')}
}
`,
  });
  t.after(() => srv.stop());
  const byName = (n: string) => ca.orders.find((o) => JSON.stringify(o.identifiers).includes(n));
  await waitFor('three orders', async () => (ca.orders.length === 3 ? true : undefined), 30_000);
  assert.equal(byName('offered.test')?.profile, 'shortlived');
  assert.equal(byName('missing.test')?.profile, undefined);
  assert.equal(byName('required.test')?.profile, 'tlsserver');
  await srv.waitForLog('error.log', /\[notice\] .*acme profile "tlsserver" is not supported by the server/, 15_000);
  // the fake CA's certificate is served for its name
  const served = await waitFor('the fake CA\'s certificate', async () => {
    const p = await servedCertificate(tlsPort, 'offered.test');
    return p.issuer.CN === 'Fake ACME CA' ? p : undefined;
  }, 30_000);
  assert.equal(served.subjectaltname, 'DNS:offered.test');
});

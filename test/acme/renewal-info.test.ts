// ACME Renewal Information (RFC 9773) against the fake CA (Debian's pebble
// predates it): the CA's suggested window decides when a certificate is
// renewed, and the new order names the certificate it replaces.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startGatehouse, freePorts } from '../kit/server.ts';
import { servedCertificate, waitFor } from './pebble.ts';
import { startFakeCa } from './fake-ca.ts';

/** RFC 9773's certID, made with openssl: base64url(AKI keyIdentifier) "." base64url(serial's DER content). */
function opensslCertId(pem: string): string {
  const text = execFileSync('openssl', ['x509', '-noout', '-ext', 'authorityKeyIdentifier', '-serial'], { input: pem, encoding: 'latin1' });
  const keyId = /([0-9A-F]{2}(?::[0-9A-F]{2})+)/.exec(text)![1].replaceAll(':', '');
  let serial = /serial=([0-9A-F]+)/.exec(text)![1];
  if (serial.length % 2) serial = `0${serial}`;
  if (parseInt(serial[0], 16) >= 8) serial = `00${serial}`;
  return `${Buffer.from(keyId, 'hex').toString('base64url')}.${Buffer.from(serial, 'hex').toString('base64url')}`;
}

test('renewal information: a window in the past renews at once, with replaces; a window a month away is only noted', { timeout: 60_000 }, async (t) => {
  const day = 86_400_000;
  let first: string | undefined;
  const ca = await startFakeCa({
    renewalInfo: (id) => {
      first ??= id;
      // the first certificate is to be replaced now; the next one in a month, asked again in an hour
      return id === first
        ? { start: new Date(Date.now() - 120_000), end: new Date(Date.now() - 60_000) }
        : { start: new Date(Date.now() + 30 * day), end: new Date(Date.now() + 31 * day), retryAfter: 3600 };
    },
  });
  t.after(() => ca.stop());
  const [tlsPort] = await freePorts(1);
  const srv = await startGatehouse({
    conf: `
events {}
http {
    acme_issuer fake { uri ${ca.url}; state_path off; }
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name ari.test;
        acme_certificate fake;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
}
`,
  });
  t.after(() => srv.stop());
  await waitFor('the renewal order', async () => (ca.orders.length >= 2 ? true : undefined), 30_000);
  const firstId = opensslCertId(ca.issued.get(0)!);
  assert.equal(ca.renewalInfoAsked[0], firstId);
  assert.equal(ca.orders[0].replaces, undefined);
  assert.equal(ca.orders[1].replaces, firstId);
  const renewed = await waitFor('the renewed certificate', async () => {
    const p = await servedCertificate(tlsPort, 'ari.test');
    return p.serialNumber === '03E9' ? p : undefined;
  }, 30_000);
  assert.equal(renewed.subjectaltname, 'DNS:ari.test');
  // the renewed certificate's window is a month away: its renewal information is asked, nothing is ordered
  const secondId = opensslCertId(ca.issued.get(1)!);
  await waitFor('renewal information for the renewed certificate', async () => (ca.renewalInfoAsked.includes(secondId) ? true : undefined), 15_000);
  await srv.waitForLog('error.log', /acme: renewal information for "ari\.test-[0-9a-f]+": window \S+ to \S+, renewal at \S+[^\n]*\n[\s\S]*renewal information for "ari\.test-[0-9a-f]+"/, 15_000, 0);
  const log = srv.readFile('error.log');
  const lastWindow = [...log.matchAll(/renewal information for "ari\.test-[0-9a-f]+": window (\S+) to (\S+), renewal at (\S+)/g)].at(-1)!;
  const at = Date.parse(lastWindow[3]);
  assert.ok(at >= Date.parse(lastWindow[1]) && at <= Date.parse(lastWindow[2]), `renewal inside the window: ${lastWindow[0]}`);
  assert.ok(at > Date.now() + 29 * day);
  assert.equal(ca.orders.length, 2);
});

test('a reload while the first certificate is being ordered waits for that order instead of placing another', { timeout: 60_000 }, async (t) => {
  let release!: () => void;
  let finalizing!: () => void;
  const finalizeAsked = new Promise<void>((r) => { finalizing = r; });
  const ca = await startFakeCa({ holdFinalize: new Promise<void>((r) => { release = r; }), onFinalize: () => finalizing() });
  t.after(() => { release(); return ca.stop(); });
  const [tlsPort] = await freePorts(1);
  const srv = await startGatehouse({
    conf: `
events {}
http {
    acme_issuer fake { uri ${ca.url}; state_path off; }
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name reload.test;
        acme_certificate fake;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
}
`,
  });
  t.after(() => srv.stop());
  await finalizeAsked;
  const from = srv.logSize();
  await srv.reload();
  // the new configuration's manager has started (it finds no certificate yet)
  await srv.waitForLog('error.log', /acme: no certificate for "reload\.test" from issuer "fake" yet/, 15_000, from);
  release();
  const served = await waitFor('the certificate of the first order', async () => {
    const p = await servedCertificate(tlsPort, 'reload.test');
    return p.issuer.CN === 'Fake ACME CA' ? p : undefined;
  }, 30_000);
  assert.equal(served.serialNumber, '03E8');
  await srv.waitForLog('error.log', /acme: certificate "reload\.test-[0-9a-f]+" is valid until/, 15_000, from);
  assert.equal(ca.orders.length, 1);
});

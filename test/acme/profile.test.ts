// Certificate profiles (draft-ietf-acme-profiles): Debian's pebble predates
// them, so a small fake ACME server of our own (fake-ca.ts) announces
// profiles and records what each newOrder asked for.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startGatehouse, freePorts } from '../kit/server.ts';
import { servedCertificate, waitFor } from './pebble.ts';
import { startFakeCa } from './fake-ca.ts';

test('profile: asked for when the CA offers it, left out (with a notice) when it does not, always asked for with require', { timeout: 60_000 }, async (t) => {
  const ca = await startFakeCa({ profiles: { shortlived: 'https://ca.test/docs#shortlived', classic: 'https://ca.test/docs#classic' } });
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

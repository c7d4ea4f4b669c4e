// Failover between issuers (`acme_certificate primary fallback=backup`, a
// Gatehouse addition): two pebbles; the first refuses the account (it
// requires external account binding, which is not configured), so the
// certificate comes from the second, is kept in the second's state_path
// and reported as its.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startGatehouse, freePorts } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';
import { pebbleSkip, startPebble, verifiedPeer, waitFor } from './pebble.ts';

test('fallback=: a failing issuer hands the order to the next one', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort] = await freePorts(2);
  const [primary, backup] = await Promise.all([
    startPebble({ httpPort, tlsPort, eab: { 'kid-1': 'zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W' } }),
    startPebble({ httpPort, tlsPort }),
  ]);
  t.after(() => Promise.all([primary.stop(), backup.stop()]));
  const srv = await startGatehouse({
    conf: `
events {}
http {
    acme_issuer primary { uri ${primary.url}; ssl_trusted_certificate ${primary.trusted}; accept_terms_of_service; }
    acme_issuer backup { uri ${backup.url}; ssl_trusted_certificate ${backup.trusted}; accept_terms_of_service; }
    server {
        listen 127.0.0.1:${httpPort};
        location = /status { acme_status; }
    }
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name failover.test;
        acme_certificate primary fallback=backup;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
}
`,
  });
  t.after(() => srv.stop());
  const backupRoot = await backup.root();
  const peer = await waitFor('the certificate from the backup issuer', () => verifiedPeer(tlsPort, 'failover.test', backupRoot), 60_000);
  assert.equal(peer.subjectaltname, 'DNS:failover.test');
  assert.equal(await verifiedPeer(tlsPort, 'failover.test', await primary.root()), undefined);
  const log = srv.readFile('error.log');
  assert.match(log, /acme: cannot obtain certificate "failover\.test-[0-9a-f]+" from issuer "primary": .*; trying issuer "backup"/);
  assert.match(log, /acme: certificate "failover\.test-[0-9a-f]+" issued by "backup"/);
  assert.doesNotMatch(log, /next attempt in/);
  assert.deepEqual(fs.readdirSync(srv.path('acme_backup')).filter((f) => f.endsWith('.crt')).length, 1);
  assert.equal(fs.readdirSync(srv.path('acme_primary')).filter((f) => f.endsWith('.crt')).length, 0);
  const res = await httpGet(httpPort, '/status', { Host: 'localhost' });
  const cert = (JSON.parse(res.body.toString()) as { certificates: Array<Record<string, string>> }).certificates[0];
  assert.equal(cert.issuer, 'backup');
  assert.equal(cert.state, 'valid');
});

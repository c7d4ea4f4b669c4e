// The account and certificates kept in state_path: external account
// binding (pebble's EAB configuration), and a restart while the CA is down
// serving the stored certificate on the first connection.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse, freePorts } from '../kit/server.ts';
import { pebbleSkip, startPebble, verifiedPeer, waitFor } from './pebble.ts';

// pebble's example EAB keys (/usr/share/doc/pebble/examples/pebble-config-external-account-bindings.json)
const EAB = { 'kid-1': 'zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W' };

test('external account binding: an account bound with the CA\'s MAC key gets its certificate, one without is refused', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort] = await freePorts(2);
  const pebble = await startPebble({ httpPort, tlsPort, eab: EAB });
  t.after(() => pebble.stop());
  const common = `uri ${pebble.url}; ssl_trusted_certificate ${pebble.trusted}; accept_terms_of_service;`;
  const srv = await startGatehouse({
    files: { 'eab.key': `${EAB['kid-1']}\n` },
    conf: `
events {}
http {
    acme_issuer bound { ${common} external_account_key kid-1 %%PREFIX%%/eab.key; }
    acme_issuer unbound { ${common} }
    server { listen 127.0.0.1:${httpPort}; }
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name eab.test;
        acme_certificate bound;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name noeab.test;
        acme_certificate unbound;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
}
`,
  });
  t.after(() => srv.stop());
  const root = await pebble.root();
  const peer = await waitFor('the EAB certificate', () => verifiedPeer(tlsPort, 'eab.test', root), 60_000);
  assert.equal(peer.subjectaltname, 'DNS:eab.test');
  const line = await srv.waitForLog('error.log', /acme: cannot obtain certificate "noeab\.test-[0-9a-f]+" from issuer "unbound": .*; next attempt in \d+s/, 30_000);
  assert.match(line, /externalAccountRequired|external account/i);
  assert.equal(await verifiedPeer(tlsPort, 'noeab.test', root), undefined);
});

test('restart with the CA down: the certificate in state_path is served on the first connection', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort] = await freePorts(2);
  const pebble = await startPebble({ httpPort, tlsPort });
  t.after(() => pebble.stop());
  const state = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-acme-state-'));
  t.after(() => fs.rmSync(state, { recursive: true, force: true }));
  // pebble's TLS certificate outlives pebble (its own directory goes when it stops)
  const trusted = path.join(state, 'pebble-tls.pem');
  fs.copyFileSync(pebble.trusted, trusted);
  const conf = `
events {}
http {
    acme_issuer pebble {
        uri ${pebble.url};
        ssl_trusted_certificate ${trusted};
        accept_terms_of_service;
        state_path ${state}/pebble;
    }
    server { listen 127.0.0.1:${httpPort}; }
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name restart.test;
        acme_certificate pebble key=rsa:2048;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
}
`;
  const first = await startGatehouse({ conf });
  const root = await pebble.root();
  let peer;
  try {
    peer = await waitFor('the issued certificate', () => verifiedPeer(tlsPort, 'restart.test', root), 60_000);
  } finally {
    await first.stop();
  }
  assert.equal(peer.bits, 2048, 'an RSA 2048 key (key=rsa:2048)');
  const accountKey = fs.readFileSync(path.join(state, 'pebble/account.key'), 'latin1');
  assert.equal((fs.statSync(path.join(state, 'pebble')).mode & 0o777).toString(8), '700');
  await pebble.stop();

  const second = await startGatehouse({ conf });
  t.after(() => second.stop());
  const again = await verifiedPeer(tlsPort, 'restart.test', root);
  assert.equal(again?.serialNumber, peer.serialNumber);
  await second.waitForLog('error.log', /acme: certificate "restart\.test-[0-9a-f]+" is valid until/, 15_000);
  assert.doesNotMatch(second.readFile('error.log'), /placeholder|cannot obtain/);
  assert.equal(fs.readFileSync(path.join(state, 'pebble/account.key'), 'latin1'), accountKey);
});

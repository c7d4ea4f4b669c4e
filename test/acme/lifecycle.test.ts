// The account and certificates kept in state_path: external account
// binding (pebble's EAB configuration), and a restart while the CA is down
// serving the stored certificate on the first connection.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse, freePorts } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';
import { pebbleSkip, servedCertificate, startPebble, verifiedPeer, waitFor } from './pebble.ts';

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

test('renewal: a short-lived certificate is replaced at half its lifetime, served without a reload', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort] = await freePorts(2);
  const pebble = await startPebble({ httpPort, tlsPort, validitySeconds: 20 });
  t.after(() => pebble.stop());
  const srv = await startGatehouse({
    conf: `
events {}
http {
    acme_issuer pebble { uri ${pebble.url}; ssl_trusted_certificate ${pebble.trusted}; accept_terms_of_service; }
    server { listen 127.0.0.1:${httpPort}; }
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name renew.test;
        acme_certificate pebble;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
}
`,
  });
  t.after(() => srv.stop());
  const root = await pebble.root();
  const first = await waitFor('the first certificate', () => verifiedPeer(tlsPort, 'renew.test', root), 60_000);
  const lifetime = Date.parse(first.valid_to) - Date.parse(first.valid_from);
  assert.ok(lifetime <= 30_000, `pebble issued a short-lived certificate (${lifetime} ms)`);
  const line = await srv.waitForLog('error.log', /acme: certificate "renew\.test-[0-9a-f]+" issued by "pebble", valid until \S+, renewal at \S+/, 15_000);
  const renewAt = Date.parse(line.match(/renewal at (\S+)/)![1]);
  const from = Date.parse(first.valid_from);
  // ½ of the lifetime for certificates of 10 days or less, ± 2 % of the lifetime
  assert.ok(Math.abs(renewAt - (from + lifetime / 2)) <= lifetime * 0.02 + 1000, `renewal at ${new Date(renewAt).toISOString()}`);
  const second = await waitFor('the renewed certificate', async () => {
    const p = await verifiedPeer(tlsPort, 'renew.test', root);
    return p && p.serialNumber !== first.serialNumber ? p : undefined;
  }, 60_000);
  assert.ok(Date.parse(second.valid_from) < Date.parse(first.valid_to), 'renewed before the first one expired');
});

test('a failed order is retried later, and a Retry-After from the CA is honoured', { timeout: 60_000 }, async (t) => {
  const asked: string[] = [];
  const ca = http.createServer((req, res) => {
    asked.push(req.url ?? '');
    // one CA is down; the other asks to come back in two hours
    if (req.url === '/down/directory') res.writeHead(500, { 'content-type': 'text/plain' }).end('down');
    else res.writeHead(503, { 'retry-after': '7200', 'content-type': 'application/problem+json' }).end('{"type":"urn:ietf:params:acme:error:rateLimited"}');
  });
  await new Promise<void>((r) => ca.listen(0, '127.0.0.1', r));
  t.after(() => ca.close());
  const port = (ca.address() as AddressInfo).port;
  const [tlsPort, httpPort] = await freePorts(2);
  const server = (name: string, issuer: string) => `
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name ${name};
        acme_certificate ${issuer};
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }`;
  const srv = await startGatehouse({
    conf: `
events {}
http {
    acme_issuer down { uri http://127.0.0.1:${port}/down/directory; state_path off; }
    acme_issuer limited { uri http://127.0.0.1:${port}/limited/directory; state_path off; }
    ${server('retry.test', 'down')}
    ${server('limited.test', 'limited')}
    server { listen 127.0.0.1:${httpPort}; location = /status { acme_status; } }
}
`,
  });
  t.after(() => srv.stop());
  const down = await srv.waitForLog('error.log', /acme: cannot obtain certificate "retry\.test-[0-9a-f]+" from issuer "down": .*next attempt in \d+s/, 15_000);
  assert.match(down, /HTTP 500/);
  const seconds = Number(down.match(/next attempt in (\d+)s/)![1]);
  assert.ok(seconds >= 58 && seconds <= 62, `first retry after about a minute (${seconds}s)`);
  const limited = await srv.waitForLog('error.log', /acme: cannot obtain certificate "limited\.test-[0-9a-f]+" from issuer "limited": .*next attempt in \d+s/, 15_000);
  assert.match(limited, /HTTP 503.*next attempt in 7200s/);
  // meanwhile handshakes get a self-signed placeholder for the server's name
  const placeholder = await servedCertificate(tlsPort, 'retry.test');
  assert.equal(placeholder.subjectaltname, 'DNS:retry.test');
  assert.equal(placeholder.issuer.CN, 'retry.test');
  assert.deepEqual(asked.sort(), ['/down/directory', '/limited/directory']);
  // the status endpoint says the same, from any worker
  const res = await httpGet(httpPort, '/status', { Host: 'localhost' });
  const certs = (JSON.parse(res.body.toString()) as { certificates: Array<Record<string, string>> }).certificates;
  const limitedStatus = certs.find((c) => c.issuer === 'limited')!;
  assert.equal(limitedStatus.state, 'failing');
  assert.match(limitedStatus.last_error, /HTTP 503/);
  const wait = Date.parse(limitedStatus.next_attempt) - Date.parse(limitedStatus.last_error_at);
  assert.ok(Math.abs(wait - 7_200_000) < 5000, `next attempt after the Retry-After (${wait} ms)`);
  assert.equal(limitedStatus.not_after, undefined);
});

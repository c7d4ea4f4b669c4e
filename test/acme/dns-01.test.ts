// dns-01 (nginx-acme has none): through `dns_hook`, whose command publishes
// the TXT record in pebble-challtestsrv (the DNS pebble validates against),
// and through the built-in responder of `acme_dns_port`, which pebble asks
// directly. Both give wildcard certificates.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import fs from 'node:fs';
import { startGatehouse, freePorts } from '../kit/server.ts';
import { pebbleSkip, startPebble, verifiedPeer, waitFor } from './pebble.ts';

test('dns-01 by a hook command: a wildcard certificate', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort] = await freePorts(2);
  const pebble = await startPebble({ httpPort, tlsPort });
  t.after(() => pebble.stop());
  const hook = `#!/bin/sh
# $1 add|remove, $2 the record name, $3 its value
echo "$1 $2 $3" >> %%PREFIX%%/hook.log
case "$1" in
  add) curl -sf -X POST -d "{\\"host\\":\\"$2.\\",\\"value\\":\\"$3\\"}" ${pebble.dnsManagement}/set-txt ;;
  remove) curl -sf -X POST -d "{\\"host\\":\\"$2.\\"}" ${pebble.dnsManagement}/clear-txt ;;
esac
`;
  const srv = await startGatehouse({
    files: { 'hook.sh': hook },
    conf: `
events {}
http {
    acme_issuer pebble {
        uri ${pebble.url};
        ssl_trusted_certificate ${pebble.trusted};
        accept_terms_of_service;
        challenge dns-01;
        dns_hook %%PREFIX%%/hook.sh;
    }
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name wild.test *.wild.test;
        acme_certificate pebble *.wild.test wild.test;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
}
`,
  });
  t.after(() => srv.stop());
  fs.chmodSync(srv.path('hook.sh'), 0o755);
  const root = await pebble.root();
  const peer = await waitFor('the wildcard certificate', () => verifiedPeer(tlsPort, 'anything.wild.test', root), 60_000);
  assert.equal(peer.subjectaltname, 'DNS:*.wild.test, DNS:wild.test');
  const calls = srv.readFile('hook.log').trim().split('\n').map((l) => l.split(' '));
  // one record per authorization (the wildcard's without its "*."), each removed once its authorization is final
  assert.deepEqual(calls.filter((c) => c[0] === 'add').map((c) => c[1]).sort(), ['_acme-challenge.wild.test', '_acme-challenge.wild.test']);
  assert.equal(calls.filter((c) => c[0] === 'remove').length, 2);
  for (const c of calls) assert.match(c[2], /^[A-Za-z0-9_-]{43}$/);
});

test('dns-01 answered by Gatehouse itself (acme_dns_port, as Angie), two workers answering from the shared zone', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort, dnsPort] = await freePorts(3);
  // pebble asks Gatehouse's responder, as a resolver would after the user delegated _acme-challenge to it
  const pebble = await startPebble({ httpPort, tlsPort, dnsServerPort: dnsPort });
  t.after(() => pebble.stop());
  const srv = await startGatehouse({
    conf: `
worker_processes 2;
events {}
http {
    acme_dns_port 127.0.0.1:${dnsPort};
    acme_issuer pebble {
        uri ${pebble.url};
        ssl_trusted_certificate ${pebble.trusted};
        accept_terms_of_service;
        challenge dns-01;
    }
    server {
        listen 127.0.0.1:${tlsPort} ssl;
        server_name *.zone.test;
        acme_certificate pebble *.zone.test zone.test;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
}
`,
  });
  t.after(() => srv.stop());
  const root = await pebble.root();
  const peer = await waitFor('the wildcard certificate', () => verifiedPeer(tlsPort, 'www.zone.test', root), 60_000);
  assert.equal(peer.subjectaltname, 'DNS:*.zone.test, DNS:zone.test');
  // the records are gone once the authorizations are final: a query now gets NXDOMAIN
  const answer = await dnsQuery(dnsPort, '_acme-challenge.zone.test', 16);
  assert.equal(answer.readUInt16BE(2) & 0x000f, 3);
  assert.equal(answer.readUInt16BE(6), 0);
});

/** One UDP DNS query; the raw answer. */
function dnsQuery(port: number, name: string, qtype: number): Promise<Buffer> {
  const labels = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)]));
  const q = Buffer.concat([Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]), ...labels, Buffer.from([0, 0, qtype, 0, 1])]);
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket('udp4');
    const timer = setTimeout(() => { s.close(); reject(new Error('no DNS answer')); }, 5000);
    s.on('message', (msg) => { clearTimeout(timer); s.close(); resolve(msg); });
    s.send(q, port, '127.0.0.1');
  });
}

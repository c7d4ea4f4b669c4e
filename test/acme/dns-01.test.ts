// dns-01 through `dns_hook` (a Gatehouse addition; nginx-acme has no
// dns-01): the hook publishes the TXT record in pebble-challtestsrv, the
// DNS pebble validates against, so a wildcard certificate can be had.
import { test } from 'node:test';
import assert from 'node:assert/strict';
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

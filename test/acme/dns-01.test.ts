// dns-01 (nginx-acme has none): through `dns_hook`, whose command publishes
// the TXT record in pebble-challtestsrv (the DNS pebble validates against),
// and through the built-in responder of `acme_dns_port`, which pebble asks
// directly. Both give wildcard certificates.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import net from 'node:net';
import { SharedDocument } from '../../src/core/shared-document.ts';
import { dnsAnswer, dnsResponderSolver } from '../../src/acme/solvers/dns-responder.ts';
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

/** Queries over one TCP connection (RFC 7766 framing), sent in one write; the answers in order. */
function dnsTcpQueries(port: number, queries: Buffer[]): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let got = Buffer.alloc(0);
    const answers: Buffer[] = [];
    s.setTimeout(5000, () => { s.destroy(); reject(new Error('no DNS answer over TCP')); });
    s.on('error', reject);
    s.on('connect', () => s.write(Buffer.concat(queries.flatMap((q) => [Buffer.from([q.length >> 8, q.length & 0xff]), q]))));
    s.on('data', (c: Buffer) => {
      got = Buffer.concat([got, c]);
      while (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) {
        answers.push(got.subarray(2, 2 + got.readUInt16BE(0)));
        got = got.subarray(2 + answers[answers.length - 1].length);
      }
      if (answers.length === queries.length) { s.destroy(); resolve(answers); }
    });
  });
}

function dnsQueryBytes(name: string, qtype: number, id: number, edns?: number): Buffer {
  const labels = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)]));
  const head = Buffer.from([id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, edns === undefined ? 0 : 1]);
  const opt = edns === undefined ? [] : [Buffer.from([0, 0, 41, edns >> 8, edns & 0xff, 0, 0, 0, 0, 0, 0])];
  return Buffer.concat([head, ...labels, Buffer.from([0, 0, qtype, 0, 1]), ...opt]);
}

test('the dns-01 responder answers over TCP too (RFC 7766): what pebble asked over UDP, asked again over TCP, gets the same answer', { skip: pebbleSkip, timeout: 120_000 }, async (t) => {
  const [httpPort, tlsPort, dnsPort] = await freePorts(3);
  // pebble asks a relay of the test's, which asks Gatehouse over UDP and over TCP while the record is published
  const relay = dgram.createSocket('udp4');
  await new Promise<void>((r) => relay.bind(0, '127.0.0.1', () => r()));
  t.after(() => relay.close());
  const seen: Array<{ udp: Buffer; tcp: Buffer }> = [];
  relay.on('message', (query, from) => {
    const upstream = dgram.createSocket('udp4');
    upstream.on('message', (udp) => {
      upstream.close();
      void dnsTcpQueries(dnsPort, [query]).then(([tcp]) => {
        seen.push({ udp, tcp });
        relay.send(udp, from.port, from.address);
      }, () => relay.send(udp, from.port, from.address));
    });
    upstream.send(query, dnsPort, '127.0.0.1');
  });
  const pebble = await startPebble({ httpPort, tlsPort, dnsServerPort: relay.address().port });
  t.after(() => pebble.stop());
  const srv = await startGatehouse({
    conf: `
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
        server_name tcp.test;
        acme_certificate pebble *.tcp.test;
        ssl_certificate $acme_certificate;
        ssl_certificate_key $acme_certificate_key;
    }
}
`,
  });
  t.after(() => srv.stop());
  const root = await pebble.root();
  await waitFor('the wildcard certificate', () => verifiedPeer(tlsPort, 'a.tcp.test', root), 60_000);
  const txt = seen.filter((s) => s.udp.readUInt16BE(6) > 0);
  assert.ok(txt.length >= 1, `pebble's TXT queries answered: ${seen.length}`);
  for (const s of txt) assert.deepEqual(s.tcp, s.udp);
  // two queries in one write: two answers, in order, on the same connection
  const [a, b] = await dnsTcpQueries(dnsPort, [dnsQueryBytes('_acme-challenge.tcp.test', 16, 1), dnsQueryBytes('other.test', 1, 2)]);
  assert.equal(a.readUInt16BE(0), 1);
  assert.equal(b.readUInt16BE(0), 2);
  assert.equal(b.readUInt16BE(2) & 0x000f, 3);
});

test('over UDP an answer longer than 512 bytes (without EDNS) is truncated, as an authoritative server does; EDNS and TCP get it whole', () => {
  const doc = new SharedDocument(new SharedArrayBuffer(64 * 1024));
  const solver = dnsResponderSolver(doc);
  // ten pending authorizations for the same name (a wildcard and its base, several orders)
  for (let i = 0; i < 10; i++) void solver.publish({ type: 'dns', value: '*.many.test' }, `t${i}`, `token${i}.thumbprint`);
  const plain = dnsAnswer(doc, dnsQueryBytes('_acme-challenge.many.test', 16, 7))!;
  assert.equal(plain.readUInt16BE(0), 7);
  assert.ok(plain.readUInt16BE(2) & 0x0200, 'TC');
  assert.equal(plain.readUInt16BE(6), 0);
  assert.ok(plain.length <= 512);
  const withEdns = dnsAnswer(doc, dnsQueryBytes('_acme-challenge.many.test', 16, 8, 1232))!;
  assert.equal(withEdns.readUInt16BE(2) & 0x0200, 0);
  assert.equal(withEdns.readUInt16BE(6), 10);
  assert.equal(withEdns.readUInt16BE(10), 1, 'the OPT record');
  const overTcp = dnsAnswer(doc, dnsQueryBytes('_acme-challenge.many.test', 16, 9), false)!;
  assert.equal(overTcp.readUInt16BE(2) & 0x0200, 0);
  assert.equal(overTcp.readUInt16BE(6), 10);
  assert.ok(overTcp.length > 512);
  // a short answer is not truncated
  const one = new SharedDocument(new SharedArrayBuffer(4096));
  void dnsResponderSolver(one).publish({ type: 'dns', value: 'one.test' }, 't', 'k.t');
  assert.equal(dnsAnswer(one, dnsQueryBytes('_acme-challenge.one.test', 16, 1))!.readUInt16BE(6), 1);
});

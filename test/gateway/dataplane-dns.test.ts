/**
 * Node host names resolved with the gateway's resolver (config.yaml's
 * `apisix.dns_resolver`, here a DNS server the test runs on 127.0.0.1) and
 * resolved again once `dns_resolver_valid` seconds have passed: the name
 * first answers 127.0.0.1, then only ::1, and the requests follow it.
 */
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { defaultYaml, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, untilRouted } from './dataplane-kit.ts';

const NAME = 'svc.gatehouse.test';

/** A DNS server answering A and AAAA queries for NAME from `records` (TTL 60: dns_resolver_valid overrides it). */
async function startDns(records: { a: string[]; aaaa: string[] }): Promise<{ port: number; queries: string[]; close(): void }> {
  const sock = dgram.createSocket('udp4');
  const queries: string[] = [];
  sock.on('message', (msg, rinfo) => {
    let off = 12;
    const labels: string[] = [];
    while (msg[off] !== 0) { labels.push(msg.subarray(off + 1, off + 1 + msg[off]).toString()); off += msg[off] + 1; }
    const qtype = msg.readUInt16BE(off + 1);
    const qend = off + 5;
    const name = labels.join('.').toLowerCase();
    queries.push(`${name}/${qtype}`);
    const addrs = name !== NAME ? [] : qtype === 1 ? records.a : qtype === 28 ? records.aaaa : [];
    const answers = addrs.map((ip) => {
      const rdata = qtype === 1 ? Buffer.from(ip.split('.').map(Number)) : ipv6Bytes(ip);
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0);
      rr.writeUInt16BE(qtype, 2);
      rr.writeUInt16BE(1, 4);
      rr.writeUInt32BE(60, 6);
      rr.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([rr, rdata]);
    });
    const head = Buffer.alloc(12);
    msg.copy(head, 0, 0, 2);
    head.writeUInt16BE(name === NAME ? 0x8180 : 0x8183, 2);
    head.writeUInt16BE(1, 4);
    head.writeUInt16BE(answers.length, 6);
    sock.send(Buffer.concat([head, msg.subarray(12, qend), ...answers]), rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => sock.bind(0, '127.0.0.1', resolve));
  return { port: (sock.address() as AddressInfo).port, queries, close: () => sock.close() };
}

function ipv6Bytes(ip: string): Buffer {
  const [head, tail = ''] = ip.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const b = Buffer.alloc(16);
  groups.forEach((g, i) => b.writeUInt16BE(parseInt(g, 16), i * 2));
  return b;
}

const records = { a: ['127.0.0.1'], aaaa: [] as string[] };
let dns: Awaited<ReturnType<typeof startDns>>;
let gw: Gateway;

before(async () => {
  dns = await startDns(records);
  const yaml = defaultYaml().replace('apisix:\n', `apisix:\n  dns_resolver:\n    - "127.0.0.1:${dns.port}"\n  dns_resolver_valid: 1\n`);
  gw = await startGateway({ yaml });
});
after(async () => { await gw.stop(); dns.close(); });

/** Origins on 127.0.0.1 and ::1 at one port, answering which they are. */
async function twinOrigins(): Promise<{ port: number; close(): void }> {
  for (;;) {
    const v4 = http.createServer((_q, s) => s.end('v4'));
    await new Promise<void>((resolve) => v4.listen(0, '127.0.0.1', resolve));
    const port = (v4.address() as AddressInfo).port;
    const v6 = http.createServer((_q, s) => s.end('v6'));
    const ok = await new Promise<boolean>((resolve) => { v6.once('error', () => resolve(false)); v6.listen(port, '::1', () => resolve(true)); });
    const close = () => { for (const s of [v4, v6]) { s.closeAllConnections(); s.close(); } };
    if (ok) return { port, close };
    close();
  }
}

describe('node host names', () => {
  it('are resolved by the configured DNS server, and again when dns_resolver_valid ends', async () => {
    const o = await twinOrigins();
    try {
      await put(gw, 'routes/dns', { uri: '/dns', upstream: { type: 'roundrobin', pass_host: 'node', nodes: { [`${NAME}:${o.port}`]: 1 } } });
      const first = await untilRouted(gw, '/dns', (r) => r.status === 200);
      assert.equal(first.body, 'v4');
      assert.ok(dns.queries.includes(`${NAME}/1`), dns.queries.join());
      records.a = [];
      records.aaaa = ['::1'];
      // within about a second (dns_resolver_valid: 1) the name is asked again and answers ::1
      await untilRouted(gw, '/dns', (r) => r.body === 'v6', {}, 10_000);
      assert.equal((await proxy(gw, '/dns')).body, 'v6');
    } finally {
      o.close();
    }
  });

  it('localhost comes from the hosts file', async () => {
    const srv = http.createServer((q, s) => s.end(`host ${q.headers.host}`));
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    try {
      const port = (srv.address() as AddressInfo).port;
      const before = dns.queries.length;
      await put(gw, 'routes/lh', { uri: '/lh', upstream: { type: 'roundrobin', pass_host: 'node', nodes: { [`localhost:${port}`]: 1 } } });
      const r = await untilRouted(gw, '/lh', (x) => x.status === 200);
      assert.equal(r.body, `host localhost:${port}`);
      assert.equal(dns.queries.slice(before).filter((q) => q.startsWith('localhost')).length, 0);
    } finally {
      srv.closeAllConnections();
      srv.close();
    }
  });
});

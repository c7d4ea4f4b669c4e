/**
 * The resolver behind proxy_pass targets built from variables, against a
 * stub DNS server on 127.0.0.1 (UDP and TCP, as nginx-tests' stubs): CNAMEs
 * followed, a truncated UDP answer asked again over TCP, errors not cached,
 * no answer ending in resolver_timeout. Reference: Debian's nginx runs the
 * same configuration with its own stub and must see the same.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import net from 'node:net';
import { parseResponse, rawRequest } from '../kit/client.ts';
import { nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, replyWith, response } from './upstream-kit.ts';

interface Rr { type: 'A' | 'CNAME'; owner: string; data: string }
interface Reply { rcode?: number; tc?: boolean; rrs?: Rr[]; silent?: boolean }

function encodeName(name: string): Buffer {
  const parts = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)]));
  return Buffer.concat([...parts, Buffer.from([0])]);
}

/** A stub DNS server: `zone(name, qtype, tcp)` says how to answer; queries are counted by name. */
class StubDns {
  udp = dgram.createSocket('udp4');
  readonly tcp = net.createServer();
  readonly asked = new Map<string, number>();
  port = 0;
  private readonly zone: (name: string, qtype: number, tcp: boolean) => Reply;

  constructor(zone: (name: string, qtype: number, tcp: boolean) => Reply) {
    this.zone = zone;
  }

  async start(): Promise<void> {
    // UDP and TCP on the same port: a TCP port taken by another test means another try (not a hang)
    for (;;) {
      await new Promise<void>((res) => this.udp.bind(0, '127.0.0.1', res));
      this.port = this.udp.address().port;
      const listening = await new Promise<boolean>((res) => {
        const onError = () => res(false);
        this.tcp.once('error', onError);
        this.tcp.listen(this.port, '127.0.0.1', () => { this.tcp.off('error', onError); res(true); });
      });
      if (listening) break;
      this.udp.close();
      this.udp = dgram.createSocket('udp4');
    }
    this.udp.on('message', (q, from) => {
      const a = this.answer(q, false);
      if (a) this.udp.send(a, from.port, from.address);
    });
    this.tcp.on('connection', (s) => {
      let buf = Buffer.alloc(0);
      s.on('error', () => undefined);
      s.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
          const a = this.answer(buf.subarray(2, 2 + buf.readUInt16BE(0)), true);
          buf = buf.subarray(2 + buf.readUInt16BE(0));
          if (a) s.write(Buffer.concat([Buffer.from([a.length >> 8, a.length & 0xff]), a]));
        }
      });
    });
  }

  close(): void {
    this.udp.close();
    this.tcp.close();
  }

  private answer(q: Buffer, tcp: boolean): Buffer | undefined {
    let o = 12;
    const labels: string[] = [];
    while (q[o]) { labels.push(q.subarray(o + 1, o + 1 + q[o]).toString()); o += q[o] + 1; }
    const name = labels.join('.');
    const qtype = q.readUInt16BE(o + 1);
    this.asked.set(name, (this.asked.get(name) ?? 0) + 1);
    const r = this.zone(name, qtype, tcp);
    if (r.silent) return undefined;
    const rrs = (r.rrs ?? []).filter((rr) => rr.type === 'CNAME' || qtype === 1);
    const head = Buffer.alloc(12);
    q.copy(head, 0, 0, 2);
    head.writeUInt16BE(0x8180 | (r.tc ? 0x0200 : 0) | (r.rcode ?? 0), 2);
    head.writeUInt16BE(1, 4);
    head.writeUInt16BE(rrs.length, 6);
    const body = rrs.map((rr) => {
      const data = rr.type === 'A' ? Buffer.from(rr.data.split('.').map(Number)) : encodeName(rr.data);
      const fixed = Buffer.alloc(10);
      fixed.writeUInt16BE(rr.type === 'A' ? 1 : 5, 0);
      fixed.writeUInt16BE(1, 2);
      fixed.writeUInt32BE(300, 4);
      fixed.writeUInt16BE(data.length, 8);
      return Buffer.concat([encodeName(rr.owner), fixed, data]);
    });
    return Buffer.concat([head, q.subarray(12, o + 5), ...body]);
  }
}

function zone(name: string, _qtype: number, tcp: boolean, asked: number): Reply {
  switch (name) {
    case 'www.t.example':
      return { rrs: [{ type: 'CNAME', owner: name, data: 'real.t.example' }] };
    case 'real.t.example':
      return { rrs: [{ type: 'A', owner: name, data: '127.0.0.1' }] };
    case 'both.t.example':
      // a CNAME and the address it leads to in one answer
      return { rrs: [{ type: 'CNAME', owner: name, data: 'other.t.example' }, { type: 'A', owner: 'other.t.example', data: '127.0.0.1' }] };
    case 'big.t.example':
      // over UDP: truncated, with an address that must not be used
      return tcp ? { rrs: [{ type: 'A', owner: name, data: '127.0.0.1' }] } : { tc: true, rrs: [{ type: 'A', owner: name, data: '127.0.0.9' }] };
    case 'flaky.t.example':
      return asked === 1 ? { rcode: 2 } : { rrs: [{ type: 'A', owner: name, data: '127.0.0.1' }] };
    case 'silent.t.example':
      return { silent: true };
    default:
      return { rcode: 3 };
  }
}

for (const [server, start, skip] of [['gatehouse', startGatehouse, false], ['nginx', startNginx, nginxSkip]] as const) {
  test(`resolver (${server})`, { skip }, async (t) => {
    const up = await RawUpstream.start(replyWith(response('from upstream')));
    const dns: StubDns = new StubDns((name, qtype, tcp): Reply => zone(name, qtype, tcp, dns.asked.get(name) ?? 0));
    await dns.start();
    const srv = await start({ conf: `
events {}
http {
${HTTP_COMMON}
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / {
            resolver 127.0.0.1:${dns.port} ipv6=off;
            resolver_timeout 500ms;
            proxy_pass http://$arg_h:${up.port};
            add_header X-Addr $upstream_addr;
        }
    }
}
` });
    t.after(async () => { await srv.stop(); dns.close(); await up.close(); });
    const get = async (host: string) => parseResponse(await rawRequest(srv.port(8080), `GET /?h=${host} HTTP/1.0\r\nHost: localhost\r\n\r\n`));

    await t.test('a CNAME is followed with a query for its target; both answers are cached', async () => {
      for (let i = 0; i < 2; i++) {
        const r = await get('www.t.example');
        assert.equal(r.status, 200);
        assert.equal(r.body.toString(), 'from upstream');
        assert.equal(r.header('x-addr'), `127.0.0.1:${up.port}`);
      }
      assert.equal(dns.asked.get('www.t.example'), 1);
      assert.equal(dns.asked.get('real.t.example'), 1);
    });

    await t.test('a CNAME with its address in the same answer needs no second query', async () => {
      assert.equal((await get('both.t.example')).status, 200);
      assert.equal(dns.asked.get('other.t.example'), undefined);
    });

    await t.test('a truncated UDP answer is asked again over TCP', async () => {
      const r = await get('big.t.example');
      assert.equal(r.status, 200);
      assert.equal(r.header('x-addr'), `127.0.0.1:${up.port}`);
    });

    await t.test('an error answer is not cached', async () => {
      assert.equal((await get('flaky.t.example')).status, 502);
      assert.match(await srv.waitForLog('error.log', /flaky\.t\.example could not/), /\[error\] .*flaky\.t\.example could not be resolved \(2: Server failure\)/);
      assert.equal((await get('flaky.t.example')).status, 200);
    });

    await t.test('no answer: 502 after resolver_timeout', async () => {
      assert.equal((await get('silent.t.example')).status, 502);
      assert.match(await srv.waitForLog('error.log', /silent\.t\.example could not/), /silent\.t\.example could not be resolved \(110: Operation timed out\)/);
    });
  });
}

/**
 * `server name resolve [service=…]` in an upstream with a zone (nginx
 * 1.27.3+; Debian's 1.22 lacks it, so the reference is nginx-tests'
 * upstream_resolve.t / upstream_service.t and nginx's source): the peers
 * follow the name's DNS answers while the server runs — an address change
 * moves the traffic, a failed lookup keeps the peers, "Host not found"
 * leaves none; SRV records give ports and backups — and the configuration
 * errors nginx gives.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { parseResponse, rawRequest } from '../kit/client.ts';
import { freePort, gatehouseBinary, startGatehouse } from '../kit/server.ts';
import { normalize, runCli, tempDir } from '../cli/run-cli.ts';
import { HTTP_COMMON, sleep } from './upstream-kit.ts';

/** A stub DNS server answering A queries with `answer` (TTL 0), SRV queries with `srv`, AAAA with nothing. */
class StubDns {
  readonly socket = dgram.createSocket('udp4');
  answer: { rcode: number; ips: string[] } = { rcode: 0, ips: [] };
  /** SRV records: priority, weight, port, target (app.test). */
  srv: Array<[number, number, number]> = [];
  queries = 0;

  async start(): Promise<number> {
    this.socket.on('message', (q, from) => {
      this.queries++;
      let o = 12;
      while (q[o]) o += q[o] + 1;
      const qtype = q.readUInt16BE(o + 1);
      const ips = qtype === 1 && this.answer.rcode === 0 ? this.answer.ips : [];
      const head = Buffer.alloc(12);
      q.copy(head, 0, 0, 2);
      head.writeUInt16BE(0x8180 | this.answer.rcode, 2);
      head.writeUInt16BE(1, 4);
      const rrs = ips.map((ip) => Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, ...ip.split('.').map(Number)]));
      if (qtype === 33) {
        const target = Buffer.from([3, ...Buffer.from('app'), 4, ...Buffer.from('test'), 0]);
        for (const [prio, weight, port] of this.srv) {
          const rd = Buffer.alloc(6);
          rd.writeUInt16BE(prio, 0);
          rd.writeUInt16BE(weight, 2);
          rd.writeUInt16BE(port, 4);
          rrs.push(Buffer.concat([Buffer.from([0xc0, 0x0c, 0, 33, 0, 1, 0, 0, 0, 0, 0, rd.length + target.length]), rd, target]));
        }
      }
      head.writeUInt16BE(rrs.length, 6);
      this.socket.send(Buffer.concat([head, q.subarray(12, o + 5), ...rrs]), from.port, from.address);
    });
    await new Promise<void>((res) => this.socket.bind(0, '127.0.0.1', res));
    return this.socket.address().port;
  }
}

/** An HTTP server on `host:port` that says which one it is. */
async function origin(host: string, port: number, tag: string): Promise<net.Server> {
  const s = net.createServer((sock) => {
    sock.on('error', () => undefined);
    sock.once('data', () => sock.end(`HTTP/1.1 200 OK\r\nContent-Length: ${tag.length}\r\nConnection: close\r\n\r\n${tag}`));
  });
  await new Promise<void>((res) => s.listen(port, host, res));
  return s;
}

test('server … resolve: the peers follow the DNS answers', async (t) => {
  const dns = new StubDns();
  const dnsPort = await dns.start();
  const port = await freePort();
  const one = await origin('127.0.0.1', port, 'one');
  const two = await origin('127.0.0.2', port, 'two');
  dns.answer = { rcode: 0, ips: ['127.0.0.1'] };
  const gh = await startGatehouse({ conf: `
events {}
http {
${HTTP_COMMON}
    resolver 127.0.0.1:${dnsPort} ipv6=off;
    resolver_timeout 1s;
    upstream u {
        zone u 64k;
        server app.test:${port} resolve;
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { proxy_pass http://u; add_header X-Addr $upstream_addr always; }
    }
}
` });
  t.after(async () => {
    await gh.stop();
    dns.socket.close();
    one.close();
    two.close();
  });
  const get = async () => parseResponse(await rawRequest(gh.port(8080), 'GET / HTTP/1.0\r\nHost: localhost\r\n\r\n'));
  /** Requests until `want` answers (the name is asked again each second with a TTL of 0). */
  const until = async (want: (r: Awaited<ReturnType<typeof get>>) => boolean) => {
    let r = await get();
    for (let i = 0; i < 40 && !want(r); i++) {
      await sleep(100);
      r = await get();
    }
    return r;
  };

  let r = await until((x) => x.status === 200);
  assert.equal(r.body.toString(), 'one');
  assert.equal(r.header('x-addr'), `127.0.0.1:${port}`);

  dns.answer = { rcode: 0, ips: ['127.0.0.2'] };
  r = await until((x) => x.body.toString() === 'two');
  assert.equal(r.header('x-addr'), `127.0.0.2:${port}`, 'the new address replaced the old one');

  // a failed lookup keeps what there is
  dns.answer = { rcode: 2, ips: [] };
  assert.match(await gh.waitForLog('error.log', /could not be resolved \(2/), /\[error\] .*app\.test could not be resolved \(2: Server failure\)/);
  assert.equal((await get()).body.toString(), 'two');

  // "Host not found": no peers left
  dns.answer = { rcode: 3, ips: [] };
  r = await until((x) => x.status === 502);
  assert.equal(r.status, 502);
  assert.match(await gh.waitForLog('error.log', /no live upstreams/), /\[error\] .*no live upstreams while connecting to upstream/);
});

test('server … service= resolve: SRV records give the peers, their ports, and backups beyond the lowest priority', async (t) => {
  const dns = new StubDns();
  const dnsPort = await dns.start();
  const [p1, p2] = [await freePort(), await freePort()];
  const one = await origin('127.0.0.1', p1, 'one');
  const two = await origin('127.0.0.1', p2, 'two');
  dns.answer = { rcode: 0, ips: ['127.0.0.1'] };
  dns.srv = [[1, 5, p1], [2, 5, p2]];
  const gh = await startGatehouse({ conf: `
events {}
http {
${HTTP_COMMON}
    resolver 127.0.0.1:${dnsPort} ipv6=off;
    upstream u {
        zone u 64k;
        server app.test service=http resolve;
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { proxy_pass http://u; add_header X-Addr $upstream_addr always; }
    }
}
` });
  t.after(async () => {
    await gh.stop();
    dns.socket.close();
    two.close();
  });
  const get = async () => parseResponse(await rawRequest(gh.port(8080), 'GET / HTTP/1.0\r\nHost: localhost\r\n\r\n'));
  let r = await get();
  for (let i = 0; i < 40 && r.status !== 200; i++) {
    await sleep(100);
    r = await get();
  }
  assert.equal(r.body.toString(), 'one', 'the lowest priority record');
  assert.equal(r.header('x-addr'), `127.0.0.1:${p1}`);
  await new Promise((res) => one.close(res));
  r = await get();
  assert.equal(r.body.toString(), 'two', 'the backup');
  assert.equal(r.header('x-addr'), `127.0.0.1:${p1}, 127.0.0.1:${p2}`);
});

async function checkConf(conf: string): Promise<string> {
  const { dir, cleanup } = tempDir();
  try {
    fs.writeFileSync(path.join(dir, 'nginx.conf'), conf);
    const res = await runCli(gatehouseBinary, ['-t', '-p', `${dir}/`, '-c', 'nginx.conf', '-e', 'error.log', '-g', `pid ${dir}/nginx.pid;`]);
    return normalize(res.stderr, dir);
  } finally {
    cleanup();
  }
}

test('server … resolve needs a zone and a resolver (nginx\'s messages)', async () => {
  const http = (body: string) => `events {}\nhttp {\n${body}\nserver { listen 127.0.0.1:1; location / { proxy_pass http://u; } }\n}\n`;
  assert.match(await checkConf(http('resolver 127.0.0.1;\nupstream u { server app.test resolve; }')),
    /resolving names at run time requires upstream "u" in DIR\/nginx\.conf:4 to be in shared memory/);
  assert.match(await checkConf(http('upstream u { zone u 64k; server app.test resolve; }')),
    /no resolver defined to resolve names at run time in upstream "u" in DIR\/nginx\.conf:3/);
  assert.match(await checkConf(http('resolver 127.0.0.1;\nupstream u { zone u 64k; server app.test service=http; }')),
    /service upstream "app\.test" requires "resolve" parameter in DIR\/nginx\.conf:4/);
  assert.match(await checkConf(http('resolver 127.0.0.1;\nupstream u { zone u 64k; server app.test:80 service=http resolve; }')),
    /service upstream "app\.test:80" may not have port in DIR\/nginx\.conf:4/);
  // a resolver in the upstream block will do
  assert.match(await checkConf(http('upstream u { zone u 64k; server app.test resolve; resolver 127.0.0.1; }')), /syntax is ok/);
});

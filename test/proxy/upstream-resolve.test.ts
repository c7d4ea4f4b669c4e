/**
 * `server name resolve` in an upstream with a zone (nginx 1.27.3+; Debian's
 * 1.22 lacks it, so the reference is nginx-tests' upstream_resolve.t and
 * nginx's documentation): the peers follow the name's DNS answers while the
 * server runs — an address change moves the traffic, a failed lookup keeps
 * the peers, "Host not found" leaves none — and the configuration errors
 * nginx gives without a zone or a resolver.
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

/** A stub DNS server answering A queries for app.test with `answer` (TTL 0), AAAA with nothing. */
class StubDns {
  readonly socket = dgram.createSocket('udp4');
  answer: { rcode: number; ips: string[] } = { rcode: 0, ips: [] };
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
      head.writeUInt16BE(ips.length, 6);
      const rrs = ips.map((ip) => Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, ...ip.split('.').map(Number)]));
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
  // a resolver in the upstream block will do
  assert.match(await checkConf(http('upstream u { zone u 64k; server app.test resolve; resolver 127.0.0.1; }')), /syntax is ok/);
});

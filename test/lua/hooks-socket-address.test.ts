// Where cosockets connect from and to: by name through the `resolver` directive (a stub DNS server
// on loopback answers A queries for `service.test` and NXDOMAIN for the rest), and from a local
// address given by tcpsock:bind. Reference: Debian's nginx 1.22 +
// libnginx-mod-http-lua 0.10.23 on the same configuration.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import net from 'node:net';
import { luaPair, same } from './hooks-kit.ts';

/** A DNS answer to query `q`: `service.test` A 127.0.0.1, anything else NXDOMAIN. */
function answer(q: Buffer): Buffer {
  let o = 12;
  const labels: string[] = [];
  while (q[o]) {
    labels.push(q.subarray(o + 1, o + 1 + q[o]).toString('latin1'));
    o += q[o] + 1;
  }
  const question = q.subarray(12, o + 5);
  const qtype = q.readUInt16BE(o + 1);
  const known = labels.join('.').toLowerCase() === 'service.test';
  const head = Buffer.alloc(12);
  q.copy(head, 0, 0, 2);
  head.writeUInt16BE(0x8180 | (known ? 0 : 3), 2);
  head.writeUInt16BE(1, 4);
  const records = known && qtype === 1 ? 1 : 0;
  head.writeUInt16BE(records, 6);
  // the answer points back at the question's name (0xc00c) with a 300 s A record
  const rr = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 127, 0, 0, 1]);
  return Buffer.concat([head, question, ...(records ? [rr] : [])]);
}

const dns = dgram.createSocket('udp4');
dns.on('message', (q, from) => dns.send(answer(q), from.port, from.address));
await new Promise<void>((resolve) => dns.bind(0, '127.0.0.1', resolve));
after(() => dns.close());

const echo = net.createServer((c) => {
  c.on('error', () => {});
  c.pipe(c);
});
await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
after(() => echo.close());
const echoPort = (echo.address() as net.AddressInfo).port;

const whoami = net.createServer((c) => {
  c.on('error', () => {});
  c.end(`${c.remoteAddress}\n`);
});
await new Promise<void>((resolve) => whoami.listen(0, '127.0.0.1', resolve));
after(() => whoami.close());
const whoamiPort = (whoami.address() as net.AddressInfo).port;

const udpEcho = dgram.createSocket('udp4');
udpEcho.on('message', (m, from) => udpEcho.send(m, from.port, from.address));
await new Promise<void>((resolve) => udpEcho.bind(0, '127.0.0.1', resolve));
after(() => udpEcho.close());

const pair = await luaPair({ after }, `
    resolver 127.0.0.1:${dns.address().port} ipv6=off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /tcp {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                ngx.say(sock:connect("service.test", ${echoPort}))
                sock:send("by name\\n")
                ngx.say(sock:receive())
                ngx.say(sock:setkeepalive())
                assert(sock:connect("service.test", ${echoPort}))
                ngx.say(sock:getreusedtimes())
                ngx.say(sock:connect("missing.test", ${echoPort}))
            }
        }
        location /bind {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                ngx.say(sock:bind("127.0.0.2"))
                assert(sock:connect("127.0.0.1", ${whoamiPort}))
                ngx.say(sock:receive())
                ngx.say(sock:bind("not an address"))
            }
        }
        location /udp {
            content_by_lua_block {
                local u = ngx.socket.udp()
                ngx.say(u:setpeername("service.test", ${udpEcho.address().port}))
                u:send("datagram")
                ngx.say(u:receive())
                ngx.say(u:setpeername("missing.test", 53))
            }
        }
    }
`);

test('connect by name through the resolver; the pool key is the name', async () => {
  const r = await same(pair, '/tcp');
  assert.equal(r.body, '1\nby name\n1\n1\nnilmissing.test could not be resolved (3: Host not found)\n');
});

test('udp setpeername by name', async () => {
  const r = await same(pair, '/udp');
  assert.equal(r.body, '1\ndatagram\nnilmissing.test could not be resolved (3: Host not found)\n');
});

test('tcpsock:bind sets the local address of the connection', async () => {
  assert.equal((await same(pair, '/bind')).body, 'true\n127.0.0.2\nnilbad address\n');
});

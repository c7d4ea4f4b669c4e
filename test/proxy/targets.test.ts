/**
 * Where proxy_pass sends requests: unix sockets, names resolved at start
 * (localhost), targets built from variables (an upstream block's name, an
 * address, or a name resolved through `resolver` — a stub DNS server on
 * 127.0.0.1 here, as nginx-tests use), and the variables that describe the
 * exchange: $proxy_host, $proxy_port, $proxy_add_x_forwarded_for,
 * $upstream_http_*, and $upstream_addr across an error_page redirect.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { parseResponse, rawRequest } from '../kit/client.ts';
import { freePort, startGatehouse } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, replyWith, response } from './upstream-kit.ts';

let tcp: RawUpstream;
let unix: RawUpstream;
/** Answers with the address and port the request came from. */
let peer: RawUpstream;
let dns: dgram.Socket;
let dnsPort: number;
let dnsQueries = 0;
let gh: RunningServer;

/** Answers A queries for *.test.example with 127.0.0.1 (TTL 300), NXDOMAIN otherwise. */
function dnsAnswer(q: Buffer): Buffer {
  let o = 12;
  const labels: string[] = [];
  while (q[o]) { labels.push(q.subarray(o + 1, o + 1 + q[o]).toString()); o += q[o] + 1; }
  const qtype = q.readUInt16BE(o + 1);
  const question = q.subarray(12, o + 5);
  const name = labels.join('.');
  const found = name.endsWith('test.example') && qtype === 1;
  const head = Buffer.alloc(12);
  q.copy(head, 0, 0, 2);
  head.writeUInt16BE(0x8180 | (name.endsWith('test.example') ? 0 : 3), 2);
  head.writeUInt16BE(1, 4);
  head.writeUInt16BE(found ? 1 : 0, 6);
  if (!found) return Buffer.concat([head, question]);
  const rr = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 127, 0, 0, 1]);
  return Buffer.concat([head, question, rr]);
}

before(async () => {
  const echo = (tag: string) => replyWith((req) => {
    const text = `${tag} ${req.uri} host=${req.headers.find(([k]) => k === 'Host')?.[1]}`;
    return `HTTP/1.1 200 OK\r\nX-From-Upstream: ${tag}\r\nContent-Length: ${text.length}\r\nConnection: close\r\n\r\n${text}`;
  });
  tcp = await RawUpstream.start(echo('tcp'));
  unix = await RawUpstream.start(echo('unix'), { unix: true });
  peer = await RawUpstream.start((_req, socket) => { socket.end(response(`${socket.remoteAddress} ${socket.remotePort}`)); });
  dns = dgram.createSocket('udp4');
  dns.on('message', (msg, rinfo) => { dnsQueries++; dns.send(dnsAnswer(msg), rinfo.port, rinfo.address); });
  await new Promise<void>((res) => dns.bind(0, '127.0.0.1', res));
  dnsPort = dns.address().port;
  gh = await startGatehouse({ conf: `
events {}
http {
${HTTP_COMMON}
    upstream backend { server ${tcp.address}; }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        resolver 127.0.0.1:${dnsPort} ipv6=off valid=30s;

        location /unix/ { proxy_pass http://${unix.address}:/via-unix/; }
        location /localhost/ { proxy_pass http://localhost:${tcp.port}/; }
        location /var/ { proxy_pass http://$arg_to/dyn$is_args$args; }
        location /varname/ { proxy_pass http://$arg_to; }
        location /vars/ {
            proxy_pass http://${tcp.address}/;
            add_header X-Proxy-Host $proxy_host;
            add_header X-Proxy-Port $proxy_port;
            add_header X-XFF $proxy_add_x_forwarded_for;
            add_header X-Up $upstream_http_x_from_upstream;
        }
        location /err/ {
            proxy_pass http://127.0.0.1:1/;
            error_page 502 = /fallback/;
        }
        location /bind/ { proxy_bind 127.0.0.2; proxy_pass http://${peer.address}; }
        location /bindport/ { proxy_bind 127.0.0.2:$arg_p; proxy_pass http://${peer.address}; }
        location /bindvar/ { proxy_bind $arg_b; proxy_pass http://${peer.address}; }
        location /fallback/ {
            proxy_pass http://${tcp.address};
            add_header X-Addr $upstream_addr;
            add_header X-Status $upstream_status;
        }
    }
}
` });
});

after(async () => {
  await gh.stop();
  await tcp.close();
  await unix.close();
  await peer.close();
  dns.close();
});

async function get(uri: string, extra = ''): Promise<ReturnType<typeof parseResponse>> {
  return parseResponse(await rawRequest(gh.port(8080), `GET ${uri} HTTP/1.1\r\nHost: localhost\r\n${extra}Connection: close\r\n\r\n`));
}

test('unix socket upstream, with a URI after the path', async () => {
  const r = await get('/unix/x');
  assert.equal(r.body.toString(), 'unix /via-unix/x host=localhost');
});

test('a name resolved at start: localhost', async () => {
  assert.equal((await get('/localhost/y')).body.toString(), `tcp /y host=localhost:${tcp.port}`);
});

test('variables: an upstream block by name, an address, a name through the resolver', async () => {
  assert.equal((await get('/varname/a?to=backend')).body.toString(), 'tcp /varname/a?to=backend host=backend');
  assert.equal((await get(`/var/b?to=127.0.0.1:${tcp.port}`)).body.toString(), `tcp /dyn?to=127.0.0.1:${tcp.port} host=127.0.0.1:${tcp.port}`);
  const before = dnsQueries;
  assert.equal((await get(`/var/c?to=svc.test.example:${tcp.port}`)).body.toString(), `tcp /dyn?to=svc.test.example:${tcp.port} host=svc.test.example:${tcp.port}`);
  assert.equal(dnsQueries, before + 1, 'one query');
  await get(`/var/c?to=svc.test.example:${tcp.port}`);
  assert.equal(dnsQueries, before + 1, 'the answer is cached');
});

test('an unknown name: 502 and nginx\'s log line', async () => {
  assert.equal((await get('/var/d?to=nowhere.invalid')).status, 502);
  assert.match(await gh.waitForLog('error.log', /could not be resolved/), /\[error\] .*nowhere\.invalid could not be resolved \(3: Host not found\)/);
});

test('$proxy_host, $proxy_port, $proxy_add_x_forwarded_for, $upstream_http_*', async () => {
  const r = await get('/vars/', 'X-Forwarded-For: 10.0.0.1\r\n');
  assert.equal(r.header('x-proxy-host'), tcp.address);
  assert.equal(r.header('x-proxy-port'), String(tcp.port));
  assert.equal(r.header('x-xff'), '10.0.0.1, 127.0.0.1');
  assert.equal(r.header('x-up'), 'tcp');
});

test('$upstream_addr and $upstream_status across an error_page redirect: " : " between the upstreams', async () => {
  const r = await get('/err/z');
  assert.equal(r.status, 200);
  assert.equal(r.header('x-addr'), `127.0.0.1:1 : ${tcp.address}`);
  assert.equal(r.header('x-status'), '502 : 200');
});

test('proxy_bind: an address, an address with a port, a bad value logged and ignored', async () => {
  assert.match((await get('/bind/')).body.toString(), /^127\.0\.0\.2 \d+$/);
  const port = await freePort();
  assert.equal((await get(`/bindport/?p=${port}`)).body.toString(), `127.0.0.2 ${port}`);
  assert.match((await get('/bindvar/?b=nonsense')).body.toString(), /^127\.0\.0\.1 \d+$/);
  assert.match(await gh.waitForLog('error.log', /invalid local address/), /\[error\] .*invalid local address "nonsense"/);
});

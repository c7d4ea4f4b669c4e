/**
 * Stream routes on `apisix.stream_proxy` ports (proxy_mode http&stream,
 * two workers), changed through the Admin API without a reload: by
 * server_port, remote_addr (CIDR), and sni read from the ClientHello with
 * TLS passed through to the origin; upstream, upstream_id, service_id;
 * TCP and UDP to loopback echo origins; no route closes the connection
 * (as t/stream-node/sanity.t, sni.t, sanity-with-service.t).
 */
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import fs from 'node:fs';
import path from 'node:path';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { freePorts } from '../kit/server.ts';
import { defaultYaml, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { put } from './dataplane-kit.ts';
import { TestCa } from './tls-kit.ts';

interface Echo { port: number; node: string; close(): void }

/** A TCP origin answering every chunk with `name:` and the chunk (over TLS with `pem`). */
async function tcpEcho(name: string, pem?: { cert: string; key: string }): Promise<Echo> {
  const onConn = (sock: net.Socket) => {
    sock.on('data', (c: Buffer) => sock.write(`${name}:${c.toString()}`));
    sock.on('error', () => {});
  };
  const server = pem ? tls.createServer({ cert: pem.cert, key: pem.key }, onConn) : net.createServer(onConn);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { port, node: `127.0.0.1:${port}`, close: () => server.close() };
}

async function udpEcho(name: string): Promise<Echo> {
  const sock = dgram.createSocket('udp4');
  sock.on('message', (m, from) => sock.send(`${name}:${m.toString()}`, from.port, from.address));
  await new Promise<void>((resolve) => sock.bind(0, '127.0.0.1', resolve));
  const port = sock.address().port;
  return { port, node: `127.0.0.1:${port}`, close: () => sock.close() };
}

/** Sends `text` on a new TCP connection; what came back before the close or 2 s of quiet ('' when closed at once, `refused` when not accepted). */
function tcpSay(port: number, text: string, quietMs = 2000): Promise<string> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1', () => sock.write(text));
    let got = '';
    sock.on('data', (c: Buffer) => {
      got += c.toString();
      if (got.length >= text.length) sock.end();
    });
    sock.on('error', (e: NodeJS.ErrnoException) => { if (e.code === 'ECONNREFUSED') got = 'refused'; });
    sock.on('close', () => resolve(got));
    sock.setTimeout(quietMs, () => sock.destroy());
  });
}

function udpSay(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    const sock = dgram.createSocket('udp4');
    const timer = setTimeout(() => { sock.close(); resolve(''); }, 1000);
    sock.on('message', (m) => { clearTimeout(timer); sock.close(); resolve(m.toString()); });
    sock.send(text, port, '127.0.0.1');
  });
}

/** TLS through the stream port: the origin's certificate CN and its echo. */
function tlsSay(port: number, servername: string, text: string): Promise<{ cn?: string; echo: string; error?: string }> {
  return new Promise((resolve) => {
    const sock = tls.connect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false }, () => sock.write(text));
    let echo = '';
    sock.on('data', (c: Buffer) => {
      echo += c.toString();
      const cn = /CN=([^\n]+)/.exec(sock.getPeerX509Certificate()?.subject ?? '')?.[1];
      sock.destroy();
      resolve({ cn, echo });
    });
    sock.on('error', (e) => resolve({ echo, error: e.message }));
    sock.on('close', () => resolve({ echo }));
  });
}

/** A TLS client to a `tls: true` stream port: the certificate's CN, the echo, or the error. */
function tlsClient(port: number, servername: string, text: string, opts: { ca?: string; cert?: string; key?: string } = {}): Promise<string> {
  return new Promise((resolve) => {
    const sock = tls.connect({ host: '127.0.0.1', port, servername, ca: opts.ca, cert: opts.cert, key: opts.key }, () => sock.write(text));
    let echo = '';
    sock.on('data', (c: Buffer) => {
      echo += c.toString();
      if (echo.length > text.length) {
        resolve(`${/CN=([^\n]+)/.exec(sock.getPeerX509Certificate()?.subject ?? '')?.[1]} ${echo}`);
        sock.destroy();
      }
    });
    sock.on('error', (e) => resolve(`error ${e.message}`));
    sock.on('close', () => resolve(`closed ${echo}`));
  });
}

/** Repeats `say` until `ok` (the change reached the workers), then 6 more times that must all hold. */
async function until(say: () => Promise<string>, ok: (s: string) => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const got = await say();
    if (ok(got)) break;
    if (Date.now() > deadline) throw new Error(`not routed as expected: ${JSON.stringify(got)}`);
    await sleep(10);
  }
  for (let i = 0; i < 6; i++) {
    const got = await say();
    assert.ok(ok(got), JSON.stringify(got));
  }
}

let gw: Gateway;
let p1: number;
let p2: number;
let p3: number;
let u1: number;
let p4: number;
let a: Echo;
let b: Echo;
let c: Echo;
let ua: Echo;
const ca = new TestCa();
const tlsA = ca.issue(['origin-a']);
const tlsB = ca.issue(['origin-b']);
let ta: Echo;
let tb: Echo;

before(async () => {
  [p1, p2, p3, u1, p4] = await freePorts(5);
  const yaml = defaultYaml(2).replace('nginx_config:', [
    '  proxy_mode: http&stream',
    '  stream_proxy:',
    '    tcp:',
    `      - 127.0.0.1:${p1}`,
    `      - addr: 127.0.0.1:${p2}`,
    `      - 127.0.0.1:${p3}`,
    `      - addr: 127.0.0.1:${p4}`,
    '        tls: true',
    '    udp:',
    `      - 127.0.0.1:${u1}`,
    'nginx_config:',
  ].join('\n'));
  [gw, a, b, c, ua, ta, tb] = await Promise.all([
    startGateway({ yaml }), tcpEcho('A'), tcpEcho('B'), tcpEcho('C'), udpEcho('UA'), tcpEcho('TA', tlsA), tcpEcho('TB', tlsB),
  ]);
});
after(async () => {
  await gw.stop();
  for (const e of [a, b, c, ua, ta, tb]) e.close();
});

const nodes = (e: Echo) => ({ type: 'roundrobin', nodes: { [e.node]: 1 } });

describe('stream routes', () => {
  it('routes by server_port and follows a change without a reload', async () => {
    await put(gw, 'stream_routes/1', { server_port: p1, upstream: nodes(a) });
    await until(() => tcpSay(p1, 'hi'), (s) => s === 'A:hi');
    await put(gw, 'stream_routes/1', { server_port: p1, upstream: nodes(b) });
    await until(() => tcpSay(p1, 'hi'), (s) => s === 'B:hi');
  });

  it('routes by remote_addr (CIDR), through upstream_id and service_id', async () => {
    await put(gw, 'upstreams/c', nodes(c));
    await put(gw, 'services/s', { upstream: nodes(a) });
    await put(gw, 'stream_routes/2', { server_port: p2, remote_addr: '10.0.0.0/8', upstream: nodes(a) });
    await put(gw, 'stream_routes/3', { server_port: p2, remote_addr: '127.0.0.0/24', upstream_id: 'c' });
    await until(() => tcpSay(p2, 'x'), (s) => s === 'C:x');
    await put(gw, 'stream_routes/3', { server_port: p2, remote_addr: '127.0.0.1', server_addr: '127.0.0.1', service_id: 's' });
    await until(() => tcpSay(p2, 'x'), (s) => s === 'A:x');
  });

  it('a node that refuses the connection is retried on another one', async () => {
    const [dead] = await freePorts(1);
    await put(gw, 'stream_routes/3', { server_port: p2, upstream: { type: 'roundrobin', nodes: { [`127.0.0.1:${dead}`]: 1, [c.node]: 1 } } });
    await until(() => tcpSay(p2, 'r'), (s) => s === 'C:r');
  });

  it('a connection no route takes is closed', async () => {
    assert.equal(await tcpSay(p3, 'anyone?'), '');
    const log = path.join(gw.prefix, 'logs', 'error.log');
    for (let i = 0; i < 100 && !fs.readFileSync(log, 'utf8').includes('not hit any route'); i++) await sleep(20);
    assert.match(fs.readFileSync(log, 'utf8'), new RegExp(`\\[info\\].*not hit any route while [a-z ]+, client: 127\\.0\\.0\\.1, server: 127\\.0\\.0\\.1:${p3}`));
  });

  it('routes by the ClientHello\'s sni, passing TLS through; exact before wildcard', async () => {
    await put(gw, 'stream_routes/s1', { sni: 'a.sni.test', upstream: nodes(ta) });
    await put(gw, 'stream_routes/s2', { sni: '*.sni.test', upstream: nodes(tb) });
    await until(async () => JSON.stringify(await tlsSay(p1, 'a.sni.test', 'tls')), (s) => s === JSON.stringify({ cn: 'origin-a', echo: 'TA:tls' }));
    await until(async () => JSON.stringify(await tlsSay(p1, 'x.y.sni.test', 'tls')), (s) => s === JSON.stringify({ cn: 'origin-b', echo: 'TB:tls' }));
    // plain TCP on the same port still goes by port
    assert.equal(await tcpSay(p1, 'plain'), 'B:plain');
  });

  it('terminates TLS on a tls: true port with the SSL object of the SNI, then routes by that name; client certificates in the handshake', async () => {
    const srv = ca.issue(['stream.tls.test']);
    const client = ca.issue(['stream client'], { client: true });
    await put(gw, 'ssls/st', { sni: 'stream.tls.test', cert: srv.cert, key: srv.key });
    await put(gw, 'stream_routes/t', { sni: 'stream.tls.test', server_port: p4, upstream: nodes(c) });
    await until(() => tlsClient(p4, 'stream.tls.test', 'sec', { ca: ca.cert }), (s) => s === 'stream.tls.test C:sec');
    assert.match(await tlsClient(p4, 'unknown.test', 'sec', { ca: ca.cert }), /^(error|closed)/);
    // no SNI and no apisix.ssl.fallback_sni
    assert.match(await tlsClient(p4, '', 'sec', { ca: ca.cert }), /^(error|closed)/);
    const log = path.join(gw.prefix, 'logs', 'error.log');
    for (let i = 0; i < 100 && !fs.readFileSync(log, 'utf8').includes('failed to find SNI'); i++) await sleep(20);
    assert.match(fs.readFileSync(log, 'utf8'), /\[error\].*failed to find any SSL certificate by SNI: unknown\.test/);
    assert.match(fs.readFileSync(log, 'utf8'), /\[error\].*failed to find SNI: please check if the client requests via IP/);
    await put(gw, 'ssls/st', { sni: 'stream.tls.test', cert: srv.cert, key: srv.key, client: { ca: ca.cert } });
    await until(() => tlsClient(p4, 'stream.tls.test', 'sec', { ca: ca.cert }), (s) => /^(error|closed)/.test(s));
    await until(() => tlsClient(p4, 'stream.tls.test', 'sec', { ca: ca.cert, cert: client.cert, key: client.key }), (s) => s === 'stream.tls.test C:sec');
  });

  it('the upstream\'s read timeout ends a quiet session', async () => {
    const silent = net.createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const node = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
    await put(gw, 'stream_routes/3', { server_port: p2, upstream: { nodes: { [node]: 1 }, timeout: { connect: 5, send: 5, read: 0.3 } } });
    // wait for the change: the silent node holds the connection instead of C echoing
    await until(() => tcpSay(p2, 'q'), (s) => s === '');
    const t0 = performance.now();
    assert.equal(await tcpSay(p2, 'q', 20_000), '');
    // closed by the 0.3 s read timeout, not by the client's 20 s (nor the default 10 min)
    assert.ok(performance.now() - t0 < 15_000, `${performance.now() - t0} ms`);
    silent.close();
  });

  it('routes UDP datagrams', async () => {
    await put(gw, 'stream_routes/u', { server_port: u1, upstream: nodes(ua) });
    await until(() => udpSay(u1, 'dgram'), (s) => s === 'UA:dgram');
  });
});

/**
 * What nginx's HTTP/2 layer checks on a request before it runs, and the
 * PROXY protocol in front of HTTP/2: a method that is not upper-case
 * letters, `_` and `-` is 400, a TRACE is 405, more fields than
 * max_headers are 400 (HTTP/1.x answers 494 there, HTTP/2 400), and on a
 * `listen … proxy_protocol` address the PROXY header may precede the
 * HTTP/2 preface (prior knowledge) or the TLS handshake (h2 by ALPN, and
 * HTTP/1.1 by ALPN too).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import net from 'node:net';
import { startGatehouse } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { DATA, END_STREAM, FrameClient, HEADERS, PREFACE, RST_STREAM, request, settings, statusOf } from './h2-frames.ts';
import type { Frame } from './h2-frames.ts';

let certs: CertFactory;
let srv: RunningServer;

const conf = `
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        http2 on;
        max_headers 3;
        location / { return 200 "ok"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8082%%;
        http2 on;
        error_page 400 /close;
        location /close { return 444; }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%% proxy_protocol;
        http2 on;
        location / { return 200 "$proxy_protocol_addr:$proxy_protocol_port $server_protocol"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8443%% proxy_protocol ssl;
        http2 on;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        location / { return 200 "$proxy_protocol_addr:$proxy_protocol_port $server_protocol"; }
    }
}
`;

before(async () => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-h2-requests-')));
  certs.selfSigned('localhost');
  srv = await startGatehouse({ conf, files: { 'localhost.crt': certs.read('localhost.crt'), 'localhost.key': certs.read('localhost.key') } });
});
after(async () => {
  await srv?.stop();
  fs.rmSync(certs.dir, { recursive: true, force: true });
});

/** Sends one request on a new connection; the response's frames of stream 1. */
async function exchange(c: FrameClient, req: Buffer): Promise<{ status: number | undefined; body: string; frames: Frame[] }> {
  c.write(PREFACE, settings(), req);
  const frames = (await c.until((f) => f.stream === 1 && (f.type === RST_STREAM || ((f.type === DATA || f.type === HEADERS) && (f.flags & END_STREAM) !== 0))))
    .filter((f) => f.stream === 1);
  c.close();
  const head = frames.find((f) => f.type === HEADERS);
  const body = Buffer.concat(frames.filter((f) => f.type === DATA).map((f) => f.payload)).toString();
  return { status: head && statusOf(head), body, frames };
}

test('TRACE is not allowed over HTTP/2', async () => {
  const res = await exchange(await FrameClient.connect(srv.port(8080)), request(1, '/', { method: 'TRACE' }));
  assert.match(res.body, /<title>405 Not Allowed<\/title>/);
});

test('a method with other than upper-case letters, _ and - is 400; error_page 400 with return 444 resets the stream', async () => {
  const res = await exchange(await FrameClient.connect(srv.port(8080)), request(1, '/', { method: 'foo' }));
  assert.equal(res.status, 400);
  const closed = await exchange(await FrameClient.connect(srv.port(8082)), request(1, '/', { method: 'foo' }));
  assert.deepEqual(closed.frames.map((f) => f.type), [RST_STREAM]);
});

test('max_headers counts the fields of an HTTP/2 request, pseudo-headers aside', async () => {
  const fields = (n: number): Array<[string, string]> => Array.from({ length: n }, (_, i) => ['x-field', String(i)]);
  const three = await exchange(await FrameClient.connect(srv.port(8080)), request(1, '/', { extra: fields(3) }));
  assert.equal(three.status, 200);
  assert.equal(three.body, 'ok');
  const four = await exchange(await FrameClient.connect(srv.port(8080)), request(1, '/', { extra: fields(4) }));
  assert.equal(four.status, 400);
  assert.match(four.body, /<title>400 Bad Request<\/title>/);
});

const PROXY = 'PROXY TCP4 192.0.2.1 192.0.2.2 1234 5678\r\n';

test('PROXY protocol before the HTTP/2 preface', async () => {
  const res = await exchange(await FrameClient.connect(srv.port(8081), false, PROXY), request(1, '/'));
  assert.equal(res.body, '192.0.2.1:1234 HTTP/2.0');
});

test('PROXY protocol before the TLS handshake: h2 and http/1.1 by ALPN', async () => {
  const res = await exchange(await FrameClient.connect(srv.port(8443), true, PROXY), request(1, '/'));
  assert.equal(res.body, '192.0.2.1:1234 HTTP/2.0');

  const plain = net.connect(srv.port(8443), '127.0.0.1');
  await new Promise<void>((resolve) => plain.once('connect', () => resolve()));
  plain.write(PROXY);
  const h1 = tls.connect({ socket: plain, ALPNProtocols: ['http/1.1'], rejectUnauthorized: false, servername: 'localhost' });
  h1.write('GET / HTTP/1.0\r\nHost: localhost\r\n\r\n');
  const chunks: Buffer[] = [];
  h1.on('data', (d: Buffer) => chunks.push(d));
  await new Promise<void>((resolve) => h1.once('close', () => resolve()));
  assert.match(Buffer.concat(chunks).toString(), /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\n192\.0\.2\.1:1234 HTTP\/1\.0$/);
});

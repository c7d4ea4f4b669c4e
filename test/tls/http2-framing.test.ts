/**
 * How an HTTP/2 response is framed and how a connection is let go, as
 * nginx does it: DATA frames of http2_chunk_size (8k by default) with
 * END_STREAM on the last one, or on a HEADERS frame of trailers when
 * add_trailer applies; 421 for a Host naming a server block without HTTP/2;
 * on a graceful shutdown (reload), GOAWAY right away while a stream is
 * open, and that stream still finishes.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { DATA, END_STREAM, FrameClient, GOAWAY, HEADERS, PREFACE, request, settings, statusOf } from './h2-frames.ts';
import type { Frame } from './h2-frames.ts';

let certs: CertFactory;
let srv: RunningServer;
let backend: http.Server;
let release: () => void = () => undefined;
let held: () => void = () => undefined;
const heldRequest = new Promise<void>((resolve) => { held = resolve; });

const conf = (upstream: number) => `
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        http2 on;
        root %%PREFIX%%/html;
        location /one { http2_chunk_size 1; return 200 "body"; }
        location /trailer { add_trailer X-T done; return 200 "body"; }
        location /small { return 200 "body"; }
        location /slow { proxy_pass http://127.0.0.1:${upstream}; }
    }
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        server_name localhost;
        http2 on;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        location / { return 200 "h2 here"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        server_name plain.example;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        location / { return 200 "not for h2"; }
    }
}
`;

before(async () => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-h2-framing-')));
  certs.selfSigned('localhost');
  // an upstream that answers once told to
  backend = http.createServer((_req, res) => {
    release = () => res.end('late');
    held();
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  srv = await startGatehouse({
    conf: conf((backend.address() as AddressInfo).port),
    files: { 'localhost.crt': certs.read('localhost.crt'), 'localhost.key': certs.read('localhost.key'), 'html/big': Buffer.alloc(20000, 'b') },
  });
});
after(async () => {
  await srv?.stop();
  backend?.closeAllConnections();
  backend?.close();
  fs.rmSync(certs.dir, { recursive: true, force: true });
});

const endOf1 = (f: Frame) => f.stream === 1 && (f.type === DATA || f.type === HEADERS) && (f.flags & END_STREAM) !== 0;

async function framesOf(path: string): Promise<Frame[]> {
  const c = await FrameClient.connect(srv.port(8080));
  c.write(PREFACE, settings(), request(1, path));
  const frames = (await c.until(endOf1)).filter((f) => f.stream === 1);
  c.close();
  return frames;
}

const data = (frames: Frame[]) => frames.filter((f) => f.type === DATA);

test('DATA frames are http2_chunk_size long; a body in one frame carries END_STREAM', async () => {
  // (after several frames node:http2 may end the stream with an empty DATA frame of its own)
  const one = data(await framesOf('/one')).filter((f) => f.payload.length > 0);
  assert.deepEqual(one.map((f) => f.payload.toString()), ['b', 'o', 'd', 'y']);

  const big = data(await framesOf('/big')).filter((f) => f.payload.length > 0);
  assert.deepEqual(big.map((f) => f.payload.length), [8192, 8192, 20000 - 16384]);

  const small = await framesOf('/small');
  assert.deepEqual(small.map((f) => [f.type, f.flags]), [[HEADERS, 4], [DATA, END_STREAM]]);
  assert.equal(small[1].payload.toString(), 'body');
});

test('with add_trailer the stream ends on the trailers, not on the DATA', async () => {
  const frames = await framesOf('/trailer');
  assert.deepEqual(frames.map((f) => [f.type, f.flags]), [[HEADERS, 4], [DATA, 0], [HEADERS, 5]]);
  assert.equal(frames[1].payload.toString(), 'body');
});

test('a Host naming a server block without HTTP/2 is 421 Misdirected Request', async () => {
  for (const [authority, status, body] of [['localhost', 200, /^h2 here$/], ['plain.example', 421, /<title>421 Misdirected Request<\/title>/]] as const) {
    const c = await FrameClient.connect(srv.port(8443), true);
    c.write(PREFACE, settings(), request(1, '/', { authority }));
    const frames = (await c.until(endOf1)).filter((f) => f.stream === 1);
    c.close();
    assert.equal(statusOf(frames.find((f) => f.type === HEADERS)!) ?? 421, status);
    assert.match(Buffer.concat(data(frames).map((f) => f.payload)).toString(), body);
  }
});

test('graceful shutdown: GOAWAY at once with a stream open, which still finishes', async () => {
  const c = await FrameClient.connect(srv.port(8080));
  c.write(PREFACE, settings(), request(1, '/slow'));
  await heldRequest;
  const reloaded = srv.reload();
  const goaway = await c.next((f) => f.type === GOAWAY);
  assert.equal(goaway.payload.readUInt32BE(0) & 0x7fffffff, 1, 'last stream: 1');
  assert.equal(goaway.payload.readUInt32BE(4), 0, 'NO_ERROR');
  release();
  const frames = (await c.until(endOf1)).filter((f) => f.stream === 1);
  assert.equal(Buffer.concat(data(frames).map((f) => f.payload)).toString(), 'late');
  c.close();
  await reloaded;
});

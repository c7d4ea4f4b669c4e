/**
 * The first frames of an HTTP/2 connection. nginx answers a client that,
 * after its preface, acknowledges the server's SETTINGS before sending any
 * SETTINGS of its own (nginx's test client does) and one that never sends
 * SETTINGS at all; nghttp2 alone would answer either with GOAWAY. Every
 * client sees one SETTINGS ACK per SETTINGS it sent, no more: real clients
 * (node:http2, curl) treat an unexpected ACK as a protocol error.
 */
import { execFileSync } from 'node:child_process';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { ACK, DATA, END_STREAM, FrameClient, GOAWAY, HEADERS, PING, PREFACE, SETTINGS, frame, request, settings, statusOf } from './h2-frames.ts';
import type { Frame } from './h2-frames.ts';

let certs: CertFactory;
let srv: RunningServer;

const conf = `
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        http2 on;
        location / { return 200 "plain $http2"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        http2 on;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        location / { return 200 "tls $http2"; }
    }
}
`;

before(async () => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-h2-preface-')));
  certs.selfSigned('localhost');
  srv = await startGatehouse({ conf, files: { 'localhost.crt': certs.read('localhost.crt'), 'localhost.key': certs.read('localhost.key') } });
});
after(async () => {
  await srv?.stop();
  fs.rmSync(certs.dir, { recursive: true, force: true });
});

const isAck = (f: Frame) => f.type === SETTINGS && (f.flags & ACK) !== 0;
const pingAck = (f: Frame) => f.type === PING && (f.flags & ACK) !== 0;

/** Reads the response of stream 1 and then a PING's answer: every frame the server sent until then. */
async function responseAndPing(c: FrameClient): Promise<Frame[]> {
  const seen = await c.until((f) => f.stream === 1 && (f.type === DATA || f.type === HEADERS) && (f.flags & END_STREAM) !== 0);
  c.write(frame(PING, 0, 0, Buffer.alloc(8, 7)));
  seen.push(...await c.until(pingAck));
  return seen;
}

function bodyOf(frames: Frame[]): string {
  return Buffer.concat(frames.filter((f) => f.type === DATA && f.stream === 1).map((f) => f.payload)).toString();
}

for (const secure of [false, true]) {
  const port = () => srv.port(secure ? 8443 : 8080);
  const expected = secure ? 'tls h2' : 'plain h2c';

  test(`${secure ? 'TLS' : 'prior knowledge'}: SETTINGS ACK before the client's own SETTINGS, then a request`, async () => {
    const c = await FrameClient.connect(port(), secure);
    c.write(PREFACE);
    const first = await c.until((f) => f.type === SETTINGS && !(f.flags & ACK));
    assert.equal(first.filter((f) => f.type === GOAWAY).length, 0);
    c.write(settings([], true), request(1, '/'));
    const seen = await responseAndPing(c);
    assert.equal(seen.filter((f) => f.type === GOAWAY).length, 0, 'no GOAWAY');
    assert.equal(statusOf(seen.find((f) => f.type === HEADERS)!), 200);
    assert.equal(bodyOf(seen), expected);
    assert.equal(seen.filter(isAck).length, 0, 'no SETTINGS ACK: the client sent no SETTINGS');
    // its own SETTINGS later: acknowledged once
    c.write(settings([[4, 65535]]));
    const later = await c.until(isAck);
    c.write(frame(PING, 0, 0, Buffer.alloc(8, 8)));
    later.push(...await c.until(pingAck));
    assert.equal(later.filter(isAck).length, 1);
    c.close();
  });

  test(`${secure ? 'TLS' : 'prior knowledge'}: SETTINGS with the preface, in one write, is acknowledged once`, async () => {
    const c = await FrameClient.connect(port(), secure);
    c.write(PREFACE, settings([[3, 100]]), request(1, '/'));
    const seen = await responseAndPing(c);
    assert.equal(bodyOf(seen), expected);
    assert.equal(seen.filter(isAck).length, 1);
    c.close();
  });

  test(`${secure ? 'TLS' : 'prior knowledge'}: the preface alone, then the client's SETTINGS after the server's, is acknowledged once`, async () => {
    const c = await FrameClient.connect(port(), secure);
    c.write(PREFACE);
    await c.next((f) => f.type === SETTINGS);
    c.write(settings(), settings([], true), request(1, '/'));
    const seen = await responseAndPing(c);
    assert.equal(bodyOf(seen), expected);
    assert.equal(seen.filter(isAck).length, 1);
    c.close();
  });

  test(`${secure ? 'TLS' : 'prior knowledge'}: node:http2 sees its SETTINGS acknowledged once`, async () => {
    const session = http2.connect(`${secure ? 'https' : 'http'}://127.0.0.1:${port()}`, { rejectUnauthorized: false });
    let acks = 0;
    session.on('localSettings', () => { acks++; });
    const errors: Error[] = [];
    session.on('error', (e) => errors.push(e));
    for (let i = 0; i < 2; i++) {
      const body = await new Promise<string>((resolve, reject) => {
        const req = session.request({ ':path': '/' });
        let data = '';
        req.setEncoding('utf8');
        req.on('data', (d: string) => { data += d; });
        req.on('end', () => resolve(data));
        req.on('error', reject);
      });
      assert.equal(body, expected);
    }
    await new Promise<void>((resolve) => session.ping(() => resolve()));
    assert.equal(acks, 1);
    assert.deepEqual(errors, []);
    await new Promise<void>((resolve) => session.close(resolve));
  });
}

const curl = (() => {
  try {
    return execFileSync('sh', ['-c', 'command -v curl']).toString().trim() || undefined;
  } catch {
    return undefined;
  }
})();

test('curl over prior knowledge and over TLS', { skip: curl ? false : 'curl is not installed' }, () => {
  // nghttp2 in curl fails the transfer on an unexpected SETTINGS ACK ("Error in the HTTP2 framing layer");
  // (one request per connection: curl 7.88 fails a second request on a prior-knowledge connection, nginx's too)
  const run = (args: string[]) => execFileSync(curl!, ['-sS', '-w', ' %{http_version}', ...args]).toString();
  assert.equal(run(['--http2-prior-knowledge', `http://127.0.0.1:${srv.port(8080)}/`]), 'plain h2c 2');
  const tls = `https://127.0.0.1:${srv.port(8443)}/`;
  assert.equal(run(['-k', '--http2', tls, tls]), 'tls h2 2tls h2 2');
});

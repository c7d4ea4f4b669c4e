/**
 * grpc_pass: a gRPC-style upstream on node:http2 (h2c, and TLS with a CA made
 * here), reached from HTTP/2 (h2c) and HTTP/1.1 clients. Unary calls with
 * the message echoed and grpc-status 0 in trailers, an error status, a
 * server stream of several messages, a message larger than every window,
 * upstream keepalive (one connection, several streams), grpc_set_header,
 * grpc_hide_header, grpc_ssl_verify. Each case runs on Gatehouse and on
 * Debian's nginx with the same configuration.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort, nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-grpc-'));
const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });

/** A gRPC message: compressed flag, 32-bit length, bytes. */
function message(s: string | Buffer): Buffer {
  const b = Buffer.from(s);
  const h = Buffer.alloc(5);
  h.writeUInt32BE(b.length, 1);
  return Buffer.concat([h, b]);
}

function messages(buf: Buffer): string[] {
  const out: string[] = [];
  for (let p = 0; p + 5 <= buf.length;) {
    const n = buf.readUInt32BE(p + 1);
    out.push(buf.subarray(p + 5, p + 5 + n).toString());
    p += 5 + n;
  }
  return out;
}

let connections = 0;
function service(stream: http2.ServerHttp2Stream, h: http2.IncomingHttpHeaders): void {
  stream.on('error', () => { /* reset by the proxy */ });
  const parts: Buffer[] = [];
  stream.on('data', (c: Buffer) => parts.push(c));
  stream.on('end', () => {
    const body = Buffer.concat(parts);
    const seen = {
      'x-seen-te': String(h.te ?? ''), 'x-seen-authority': String(h[':authority']),
      'x-seen-custom': String(h['x-custom'] ?? ''), 'x-seen-ct': String(h['content-type']),
      'x-seen-conn': String(h['x-conn']), 'x-secret': 'hidden',
    };
    const respond = () => stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...seen }, { waitForTrailers: true });
    const path = String(h[':path']);
    if (path === '/svc/Fail') {
      respond();
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '5', 'grpc-message': 'not found' }));
      stream.end();
      return;
    }
    respond();
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': '' }));
    if (path === '/svc/Stream') {
      for (let i = 1; i <= 3; i++) stream.write(message(`part ${i}`));
      stream.end();
      return;
    }
    const m = messages(body);
    stream.end(message(path === '/svc/Big' ? `${m[0].length}:${m[0].slice(0, 4)}` + m[0] : `hello ${m[0] ?? ''}`));
  });
}

let h2c: http2.Http2Server;
let h2s: http2.Http2SecureServer;
let h2cPort = 0;
let h2sPort = 0;

before(async () => {
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=grpc test ca');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=grpc.example');
  fs.writeFileSync(path.join(dir, 'server.ext'), 'subjectAltName=DNS:grpc.example\n');
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'server.ext');
  fs.chmodSync(dir, 0o755);
  for (const f of fs.readdirSync(dir)) fs.chmodSync(path.join(dir, f), 0o644);
  const onSession = (s: http2.Http2Session) => {
    const n = ++connections;
    s.on('error', () => { /* a client gone */ });
    s.on('stream', (st, h) => { h['x-conn'] = String(n); });
  };
  h2c = http2.createServer();
  h2c.on('session', onSession);
  h2c.on('stream', service);
  h2s = http2.createSecureServer({ key: fs.readFileSync(path.join(dir, 'server.key')), cert: fs.readFileSync(path.join(dir, 'server.crt')) });
  h2s.on('session', onSession);
  h2s.on('stream', service);
  await new Promise<void>((res) => h2c.listen(0, '127.0.0.1', res));
  await new Promise<void>((res) => h2s.listen(0, '127.0.0.1', res));
  h2cPort = (h2c.address() as net.AddressInfo).port;
  h2sPort = (h2s.address() as net.AddressInfo).port;
});

after(() => {
  h2c.close();
  h2s.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const conf = (port: number, port1: number) => `
events {}
http {
    access_log off;
    upstream ka { server 127.0.0.1:${h2cPort}; keepalive 2; }
    server {
        listen 127.0.0.1:${port} http2;
        listen 127.0.0.1:${port1};
        client_max_body_size 8m;
        location /svc/ {
            grpc_pass grpc://127.0.0.1:${h2cPort};
            grpc_set_header X-Custom "from-$request_method";
            grpc_hide_header X-Secret;
        }
        location /ka/ {
            rewrite ^/ka(/.*)$ $1 break;
            grpc_pass ka;
        }
        location /tls/ {
            rewrite ^/tls(/.*)$ $1 break;
            grpc_pass grpcs://127.0.0.1:${h2sPort};
            grpc_ssl_name grpc.example;
            grpc_ssl_server_name on;
            grpc_ssl_verify on;
            grpc_ssl_trusted_certificate ${dir}/ca.crt;
        }
        location /badtls/ {
            rewrite ^/badtls(/.*)$ $1 break;
            grpc_pass grpcs://127.0.0.1:${h2sPort};
            grpc_ssl_verify on;
            grpc_ssl_trusted_certificate ${dir}/ca.crt;
        }
    }
}
`;

interface Answer { status: number; headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders; body: Buffer }

/** One call over an HTTP/2 (h2c) client session. */
function call(session: http2.ClientHttp2Session, p: string, body: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const s = session.request({ ':method': 'POST', ':path': p, 'content-type': 'application/grpc', te: 'trailers' });
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    const parts: Buffer[] = [];
    s.on('response', (h) => { headers = h; });
    s.on('trailers', (h) => { trailers = h; });
    s.on('data', (c: Buffer) => parts.push(c));
    s.on('end', () => resolve({ status: Number(headers[':status']), headers, trailers, body: Buffer.concat(parts) }));
    s.on('error', reject);
    s.end(body);
  });
}

/** One call over HTTP/1.1: the chunked body and its trailers. */
async function call1(port: number, p: string, body: Buffer): Promise<{ head: string; body: Buffer; trailers: string }> {
  const sock = net.connect(port, '127.0.0.1');
  const parts: Buffer[] = [];
  sock.on('data', (c: Buffer) => parts.push(c));
  sock.write(`POST ${p} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/grpc\r\nTE: trailers\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
  sock.write(body);
  await new Promise((res) => sock.on('close', res));
  const all = Buffer.concat(parts);
  const end = all.indexOf('\r\n\r\n');
  const head = all.toString('latin1', 0, end);
  const out: Buffer[] = [];
  let pos = end + 4;
  for (;;) {
    const eol = all.indexOf('\r\n', pos);
    const n = parseInt(all.toString('latin1', pos, eol), 16);
    if (eol < 0 || Number.isNaN(n)) throw new Error(`not chunked: ${all.toString('latin1').slice(0, 300)}`);
    pos = eol + 2;
    if (n === 0) break;
    out.push(all.subarray(pos, pos + n));
    pos += n + 2;
  }
  return { head, body: Buffer.concat(out), trailers: all.toString('latin1', pos) };
}

for (const [name, start, skip] of [['gatehouse', startGatehouse, false], ['nginx', startNginx, nginxSkip]] as const) {
  test(`grpc_pass (${name})`, { skip }, async (t) => {
    const port = await freePort();
    const port1 = await freePort();
    const srv: RunningServer = await start({ conf: conf(port, port1) });
    t.after(() => srv.stop());
    const session = http2.connect(`http://127.0.0.1:${port}`);
    t.after(() => session.close());

    await t.test('unary call over HTTP/2: message, headers, grpc-status 0 as trailers', async () => {
      const a = await call(session, '/svc/Unary', message('world'));
      assert.equal(a.status, 200);
      assert.equal(a.headers['content-type'], 'application/grpc');
      assert.deepEqual(messages(a.body), ['hello world']);
      assert.equal(a.trailers['grpc-status'], '0');
      assert.equal(a.trailers['grpc-message'], '');
      assert.equal(a.headers['x-seen-te'], 'trailers');
      assert.equal(a.headers['x-seen-ct'], 'application/grpc');
      assert.equal(a.headers['x-seen-authority'], `127.0.0.1:${h2cPort}`);
      assert.equal(a.headers['x-seen-custom'], 'from-POST');
      assert.equal(a.headers['x-secret'], undefined);
    });

    await t.test('an error status reaches the client as trailers', async () => {
      const a = await call(session, '/svc/Fail', message('x'));
      assert.equal(a.status, 200);
      assert.equal(a.trailers['grpc-status'], '5');
      assert.equal(a.trailers['grpc-message'], 'not found');
    });

    await t.test('server streaming: every message, then the trailers', async () => {
      const a = await call(session, '/svc/Stream', message('go'));
      assert.deepEqual(messages(a.body), ['part 1', 'part 2', 'part 3']);
      assert.equal(a.trailers['grpc-status'], '0');
    });

    await t.test('a message larger than the flow-control windows, both ways', async () => {
      const big = 'x'.repeat(3 * 1024 * 1024);
      const a = await call(session, '/svc/Big', message(big));
      const m = messages(a.body);
      assert.equal(m.length, 1);
      assert.equal(m[0].length, String(big.length).length + 5 + big.length);
      assert.ok(m[0].startsWith(`${big.length}:xxxx`));
      assert.equal(a.trailers['grpc-status'], '0');
    });

    await t.test('HTTP/1.1 client: chunked body with the grpc trailers', async () => {
      const a = await call1(port1, '/svc/Unary', message('one'));
      assert.match(a.head, /^HTTP\/1\.1 200/);
      assert.match(a.head, /\r\nTransfer-Encoding: chunked/i);
      assert.deepEqual(messages(a.body), ['hello one']);
      assert.match(a.trailers, /grpc-status: 0\r\n/i);
      const f = await call1(port1, '/svc/Fail', message('one'));
      assert.match(f.trailers, /grpc-status: 5\r\n/i);
      assert.match(f.trailers, /grpc-message: not found\r\n/i);
    });

    await t.test('upstream keepalive: one connection for several calls', async () => {
      const a = await call(session, '/ka/svc/Unary', message('a'));
      const b = await call(session, '/ka/svc/Unary', message('b'));
      assert.deepEqual(messages(b.body), ['hello b']);
      assert.equal(a.headers['x-seen-conn'], b.headers['x-seen-conn']);
      assert.equal(a.headers['x-seen-authority'], 'ka');
    });

    await t.test('grpcs:// with grpc_ssl_verify against the test CA', async () => {
      const a = await call(session, '/tls/svc/Unary', message('tls'));
      assert.deepEqual(messages(a.body), ['hello tls']);
      assert.equal(a.trailers['grpc-status'], '0');
      // the certificate is not for 127.0.0.1: verification fails, 502
      const b = await call(session, '/badtls/svc/Unary', message('tls'));
      assert.equal(b.status, 502);
      assert.match(srv.readFile('error.log'), /upstream SSL certificate does not match "127\.0\.0\.1"/);
    });
  });
}

/**
 * Serving setups people run: ACME HTTP-01 challenge files from a webroot
 * next to a plain-HTTP server that redirects everything else to https
 * (compared with Debian's nginx 1.22), and large files streamed with
 * bounded memory to a slow client.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { startGatehouse } from '../kit/server.ts';
import { logLines, same, startPair } from './static-kit.ts';

test('ACME HTTP-01 challenges are served from a webroot, the rest redirects to https', async (t) => {
  const token = 'Xq1_Fz-9aBcDeFgHiJkLmNoPqRsTuVwXyZ012345678';
  const pair = await startPair(t, {
    conf: `
events {}
http {
    server_tokens off;
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name example.test www.example.test;
        location ^~ /.well-known/acme-challenge/ {
            root %%PREFIX%%/acme;
            default_type text/plain;
        }
        location / {
            return 301 https://$host$request_uri;
        }
    }
}`,
    files: { [`acme/.well-known/acme-challenge/${token}`]: `${token}.key-thumbprint` },
  });
  const get = (path: string, host = 'example.test') => `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`;
  const ok = await same(t, pair, get(`/.well-known/acme-challenge/${token}`));
  assert.equal(ok.status, 200);
  assert.equal(ok.header('content-type'), 'text/plain');
  assert.equal(ok.body.toString(), `${token}.key-thumbprint`);
  const missing = await same(t, pair, get('/.well-known/acme-challenge/unknown'));
  assert.equal(missing.status, 404);
  assert.equal(logLines(pair.gh, /open\(\) ".*\/acme\/.well-known\/acme-challenge\/unknown" failed \(2: No such file or directory\)/).length, 1);
  const redirect = await same(t, pair, get('/shop/cart?id=7', 'WWW.Example.test:8080'));
  assert.equal(redirect.status, 301);
  assert.equal(redirect.header('location'), 'https://www.example.test/shop/cart?id=7');
  assert.equal((await same(t, pair, get('/.well-known/other'))).header('location'), 'https://example.test/.well-known/other');
});

/**
 * Bytes a process (all its threads: the workers are threads) has read, in
 * KiB (Linux): how much of a file the server took in, which resident memory,
 * moved by V8's garbage, only hints at.
 */
function readKiB(pid: number): number {
  const m = /rchar:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/io`, 'latin1'));
  return m ? Math.floor(Number(m[1]) / 1024) : 0;
}

test('a large file streams with bounded memory to a slow client', async (t) => {
  const size = 256 * 1024 * 1024;
  const srv = await startGatehouse({
    conf: `
events {}
http {
    access_log off;
    server { listen 127.0.0.1:%%PORT_8080%%; root %%PREFIX%%/html; }
}`,
    files: { 'html/small.txt': 'x' },
  });
  t.after(() => srv.stop());
  // a sparse file: no disk space used, read as zeros
  fs.writeFileSync(srv.path('html/big.bin'), '');
  fs.truncateSync(srv.path('html/big.bin'), size);
  const before = readKiB(srv.process.pid!);

  const sock = net.connect(srv.port(8080), '127.0.0.1');
  sock.write('GET /big.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  let received = 0;
  let head = '';
  await new Promise<void>((resolve) => {
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (head.length < 200) head += chunk.toString('latin1');
      // stop reading after the first bytes: the server must wait, not read the file ahead (about 5 MiB of 256 is read)
      if (received > 1024 * 1024) { sock.pause(); sock.off('data', onData); resolve(); }
    };
    sock.on('data', onData);
  });
  await new Promise((r) => setTimeout(r, 1000));
  const stalled = readKiB(srv.process.pid!);
  assert.match(head, /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(head, new RegExp(`Content-Length: ${size}\r\n`));
  assert.ok(stalled - before < 64 * 1024, `the server read ${stalled - before} KiB of the file while the client did not read`);

  // now read everything; the whole file arrives
  await new Promise<void>((resolve, reject) => {
    sock.on('data', (chunk: Buffer) => { received += chunk.length; });
    sock.on('end', resolve);
    sock.on('error', reject);
    sock.resume();
  });
  const headLength = head.indexOf('\r\n\r\n') + 4;
  assert.equal(received - headLength, size);

  // HEAD does not read the file
  const headOnly = await new Promise<string>((resolve) => {
    const s = net.connect(srv.port(8080), '127.0.0.1');
    let text = '';
    s.on('data', (c: Buffer) => { text += c.toString('latin1'); });
    s.on('end', () => resolve(text));
    s.write('HEAD /big.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  });
  assert.match(headOnly, new RegExp(`Content-Length: ${size}\r\n`), JSON.stringify(headOnly));
  assert.ok(headOnly.endsWith("\r\n\r\n"), JSON.stringify(headOnly));

  // a client that goes away mid-file does not disturb the next request
  const gone = net.connect(srv.port(8080), '127.0.0.1');
  gone.write('GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n');
  await new Promise((r) => gone.once('data', r));
  gone.destroy();
  const after = await new Promise<string>((resolve) => {
    const s = net.connect(srv.port(8080), '127.0.0.1');
    let text = '';
    s.on('data', (c: Buffer) => { text += c.toString('latin1'); });
    s.on('end', () => resolve(text));
    s.write('GET /small.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  });
  assert.match(after, /\r\n\r\nx$/);
});

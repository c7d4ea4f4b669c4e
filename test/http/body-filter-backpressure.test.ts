/**
 * Backpressure through the body filter chain: a large page that goes
 * through sub_filter and gzip, or through SSI with an include, to a client
 * that stops reading. The server must wait rather than hold the page in
 * memory, and once the client reads again the whole body arrives,
 * filtered as it would have been at full speed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import zlib from 'node:zlib';
import { startGatehouse } from '../kit/server.ts';

/**
 * Bytes a process (all its threads: the workers are threads) has read
 * through read(2) and friends, in KiB (Linux). Unlike resident memory, which
 * moves with V8's garbage, this says how much of the page the server took in.
 */
function readKiB(pid: number): number {
  const m = /rchar:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/io`, 'latin1'));
  return m ? Math.floor(Number(m[1]) / 1024) : 0;
}

/**
 * About `mib` MiB of lines of random base64 (compresses little), with
 * `marker` (with a `<`, which base64 lacks, so it is nowhere else) at the
 * start of every 64th line.
 */
function page(mib: number, marker: string): string {
  const lines: string[] = [];
  const line = 1024;
  for (let i = 0; i < mib * 1024; i++) {
    const text = crypto.randomBytes((line * 3) / 4).toString('base64');
    lines.push(i % 64 === 0 ? marker + text.slice(marker.length) : text);
  }
  return lines.join('\n');
}

/**
 * Asks for `path`, stops reading after the first MiB for a second and
 * returns how much the server read meanwhile, then reads the rest: the head and body.
 */
async function slowClient(port: number, pid: number, path: string): Promise<{ readKiB: number; head: string; body: Buffer }> {
  const before = readKiB(pid);
  const sock = net.connect(port, '127.0.0.1');
  sock.write(`GET ${path} HTTP/1.0\r\nHost: localhost\r\nAccept-Encoding: gzip\r\n\r\n`);
  const chunks: Buffer[] = [];
  let received = 0;
  await new Promise<void>((resolve) => {
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.length;
      if (received > 1024 * 1024) { sock.pause(); sock.off('data', onData); resolve(); }
    };
    sock.on('data', onData);
  });
  await new Promise((r) => setTimeout(r, 1000));
  const readMeanwhile = readKiB(pid) - before;
  await new Promise<void>((resolve, reject) => {
    sock.on('data', (chunk: Buffer) => chunks.push(chunk));
    sock.on('end', resolve);
    sock.on('error', reject);
    sock.resume();
  });
  const all = Buffer.concat(chunks);
  const end = all.indexOf('\r\n\r\n');
  return { readKiB: readMeanwhile, head: all.subarray(0, end).toString('latin1'), body: all.subarray(end + 4) };
}

/** The most a loopback connection's socket buffers may hold, in MiB: the kernel autotunes up to these maxima. */
function socketBuffersMiB(): number {
  const max = (name: string) => Number(fs.readFileSync(`/proc/sys/net/ipv4/${name}`, 'latin1').trim().split(/\s+/)[2]);
  return Math.ceil((max('tcp_rmem') + max('tcp_wmem')) / (1 << 20));
}

test('sub_filter then gzip, and SSI with an include, wait for a slow client and send the whole body', async (t) => {
  // With backpressure the server reads what fills the pipeline and the loopback socket
  // buffers (usually 5-7 MiB) and waits; a chain that ignored it reads the whole page.
  // The kernel may grow the client's receive buffer up to tcp_rmem's maximum (32 MiB on
  // CI's machine; once 21 MiB were read with backpressure working), so the limit allows
  // the socket buffers' maxima and 16 MiB of pipeline, and the page is larger still.
  // Resident memory was the measure once, and V8's garbage made it fail.
  const limitKiB = (socketBuffersMiB() + 16) * 1024;
  const size = limitKiB / 1024 + 16;
  const srv = await startGatehouse({
    conf: `
events {}
http {
    access_log off;
    default_type text/html;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        root %%PREFIX%%/html;
        location /sub/ { sub_filter '<mark>' REPLACED; sub_filter_once off; gzip on; gzip_http_version 1.0; }
        location /ssi/ { ssi on; }
    }
}`,
    files: { 'html/ssi/part.html': 'PART' },
  });
  t.after(() => srv.stop());
  const text = page(size, '<mark>');
  fs.mkdirSync(srv.path('html/sub'), { recursive: true });
  fs.writeFileSync(srv.path('html/sub/big.html'), text);
  fs.writeFileSync(srv.path('html/ssi/big.html'), `<!--# include virtual="/ssi/part.html" -->${text}`);
  const pid = srv.process.pid!;

  const sub = await slowClient(srv.port(8080), pid, '/sub/big.html');
  assert.match(sub.head, /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(sub.head, /\r\nContent-Encoding: gzip(\r\n|$)/);
  assert.ok(sub.readKiB < limitKiB, `the server read ${sub.readKiB} KiB while the client did not read (gzip)`);
  assert.ok(zlib.gunzipSync(sub.body).equals(Buffer.from(text.replaceAll('<mark>', 'REPLACED'), 'latin1')), 'the whole page, filtered');

  const ssi = await slowClient(srv.port(8080), pid, '/ssi/big.html');
  assert.match(ssi.head, /^HTTP\/1\.1 200 OK\r\n/);
  assert.ok(ssi.readKiB < limitKiB, `the server read ${ssi.readKiB} KiB while the client did not read (SSI)`);
  assert.equal(ssi.body.length, 4 + text.length);
  assert.ok(ssi.body.equals(Buffer.from(`PART${text}`, 'latin1')), 'the whole page, with the include in its place');
});

/**
 * Relaying response bodies: proxy_buffering off passes data on as it comes,
 * proxy_buffering on holds small pieces of a body of known length until the
 * body is complete; a slow client makes the proxy spill to a temporary file
 * (within proxy_max_temp_file_size) and then push back on the upstream, and
 * every byte still arrives intact; proxy_limit_rate slows the reading of a
 * buffered body. Reference for the buffering semantics:
 * nginx's event pipe (docs in /work/shared/reference/nginx-behaviours.md).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { parseResponse } from '../kit/client.ts';
import { startGatehouse } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, sleep } from './upstream-kit.ts';

let up: RawUpstream;
let gh: RunningServer;
/** Lets a test release the rest of a response the upstream is holding. */
let release: (() => void) | undefined;
const BIG = crypto.randomBytes(6 * 1024 * 1024);
const MEDIUM = crypto.randomBytes(12000);

before(async () => {
  up = await RawUpstream.start(async (req, socket) => {
    if (req.uri.startsWith('/parts')) {
      // a body of known length in two parts; the second waits for the test
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n' + (req.uri.includes('xab') ? 'X-Accel-Buffering: no\r\n' : '') + '\r\npart1', 'latin1');
      await new Promise<void>((res) => { release = res; });
      socket.end('part2');
      return;
    }
    if (req.uri.startsWith('/rate')) {
      // the rate comes in a header; the body in two chunks
      const rate = new URL(req.uri, 'http://x').searchParams.get('r');
      socket.write(`HTTP/1.1 200 OK\r\nX-Rate: ${rate}\r\nTransfer-Encoding: chunked\r\n\r\n`, 'latin1');
      socket.end(Buffer.concat([Buffer.from('1770\r\n'), MEDIUM.subarray(0, 6000), Buffer.from('\r\n1770\r\n'), MEDIUM.subarray(6000), Buffer.from('\r\n0\r\n\r\n')]));
      return;
    }
    if (req.uri.startsWith('/big')) {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${BIG.length}\r\n\r\n`, 'latin1');
      socket.end(BIG);
    }
  });
  gh = await startGatehouse({ conf: `
events {}
http {
${HTTP_COMMON}
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location /on/ { proxy_pass http://${up.address}/; }
        location /off/ { proxy_pass http://${up.address}/; proxy_buffering off; }
        location /spill/ { proxy_pass http://${up.address}/; proxy_max_temp_file_size 64m; }
        location /nofile/ { proxy_pass http://${up.address}/; proxy_max_temp_file_size 0; }
        location /limited/ { proxy_pass http://${up.address}/; proxy_limit_rate $upstream_http_x_rate; }
    }
}
` });
});

after(async () => {
  await gh.stop();
  await up.close();
});

/** A client that collects data and reports each read. */
function client(path: string): { sock: net.Socket; reads: Buffer[]; next(): Promise<Buffer>; all(): Promise<Buffer> } {
  const sock = net.connect(gh.port(8080), '127.0.0.1');
  const reads: Buffer[] = [];
  let wake: (() => void) | undefined;
  let ended = false;
  sock.on('data', (d) => { reads.push(d); wake?.(); });
  sock.on('end', () => { ended = true; wake?.(); });
  sock.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
  let taken = 0;
  return {
    sock, reads,
    async next() {
      while (reads.length <= taken && !ended) await new Promise<void>((res) => { wake = res; });
      return reads[taken++] ?? Buffer.alloc(0);
    },
    async all() {
      while (!ended) await new Promise<void>((res) => { wake = res; });
      return Buffer.concat(reads);
    },
  };
}

test('proxy_buffering off: the first part reaches the client before the upstream sends the rest', async () => {
  const c = client('/off/parts');
  let got = '';
  while (!got.includes('part1')) got += (await c.next()).toString('latin1');
  assert.doesNotMatch(got, /part2/);
  release!();
  assert.match((await c.all()).toString('latin1'), /\r\n\r\npart1part2$/);
});

test('X-Accel-Buffering: no switches buffering off for the response', async () => {
  const c = client('/on/parts-xab');
  let got = '';
  while (!got.includes('part1')) got += (await c.next()).toString('latin1');
  assert.doesNotMatch(got, /part2/);
  release!();
  await c.all();
});

test('proxy_buffering on: a partial body of known length is held until it is complete', async () => {
  const c = client('/on/parts');
  // the upstream has sent part1; give the proxy time to (wrongly) pass it on, then send the rest
  await sleep(300);
  release!();
  const text = (await c.all()).toString('latin1');
  assert.match(text, /\r\n\r\npart1part2$/);
  const firstWithBody = c.reads.map((b) => b.toString('latin1')).join('').indexOf('part1');
  assert.ok(firstWithBody > 0);
  // the head and both parts went out together: no read ends between them
  let seen = '';
  for (const r of c.reads) {
    seen += r.toString('latin1');
    if (seen.includes('part1')) {
      assert.match(seen, /part2/, 'part1 did not arrive without part2');
      break;
    }
  }
});

async function slowRead(path: string, readBack: boolean): Promise<Buffer> {
  const sock = net.connect(gh.port(8080), '127.0.0.1');
  sock.pause();
  sock.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
  // let the upstream send everything it can while the client reads nothing
  await sleep(500);
  if (!readBack) { sock.destroy(); return Buffer.alloc(0); }
  const parts: Buffer[] = [];
  sock.on('data', (d) => parts.push(d));
  const done = new Promise<void>((res) => sock.on('end', res));
  sock.resume();
  await done;
  const all = Buffer.concat(parts);
  return all.subarray(all.indexOf('\r\n\r\n') + 4);
}

test('a slow client: the body spills to a temporary file and arrives intact', async () => {
  const body = await slowRead('/spill/big', true);
  assert.equal(body.length, BIG.length);
  assert.ok(body.equals(BIG), 'every byte arrives in order');
  assert.match(gh.logLines().join('\n'), /\[warn\] .*an upstream response is buffered to a temporary file .*proxy_temp\/\d{10} while reading upstream/);
});

test('proxy_max_temp_file_size 0: the upstream is held back instead, and the body arrives intact', async () => {
  const before = gh.logLines().filter((l) => l.includes('buffered to a temporary file')).length;
  const body = await slowRead('/nofile/big', true);
  assert.ok(body.equals(BIG));
  assert.equal(gh.logLines().filter((l) => l.includes('buffered to a temporary file')).length, before, 'no temporary file');
});

test('the client going away while the proxy holds data frees the exchange', async () => {
  await slowRead('/spill/big', false);
  // the next request on the same upstream still works
  const body = await slowRead('/spill/big', true);
  assert.ok(body.equals(BIG));
});

test('proxy_limit_rate (a variable, read once the head is in): the body is read at that rate and arrives intact', async () => {
  const started = Date.now();
  const limited = await client('/limited/rate?r=5000').all();
  // 12 kB at 5000 bytes a second can only be read from the third whole second on: a lower bound by design
  assert.ok(Date.now() - started >= 1000, 'reading was slowed down');
  assert.ok(parseResponse(limited).body.equals(MEDIUM));
  // a value that is not a size means no limit (ngx_http_complex_value_size)
  const free = await client('/limited/rate?r=fast').all();
  assert.ok(parseResponse(free).body.equals(MEDIUM));
});

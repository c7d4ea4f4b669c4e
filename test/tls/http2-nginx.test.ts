/**
 * HTTP/2 over TLS as a client sees it, compared with Debian's nginx 1.22 on
 * the same configuration (reference: nginx; skipped without it): access log
 * variables per stream, static files, error pages, gzip, request bodies with
 * and without Content-Length, client_max_body_size, proxying with a body.
 * $request_length and $bytes_sent are left out of the comparison: they
 * count HPACK bytes, which depend on each side's encoder (see docs/tls.md).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { startPair } from '../kit/pair.ts';
import type { RunningServer } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { h2connect, h2request } from './http2-client.ts';
import type { H2Response } from './http2-client.ts';
import { maskNameInPageLength, maskNameInResponse, signOf } from '../kit/server-name.ts';

let certs: CertFactory;
let backend: http.Server;

before(async () => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-h2n-')));
  certs.selfSigned('localhost');
  // tells what the proxied request looked like
  backend = http.createServer((req, res) => {
    let n = 0;
    req.on('data', (d: Buffer) => { n += d.length; });
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain', connection: 'close', 'keep-alive': 'timeout=5', 'x-up': 'yes' });
      res.end(`${req.method} ${req.url} len=${n} cl=${req.headers['content-length']} te=${req.headers['transfer-encoding']} cookie=${req.headers.cookie}`);
    });
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
});
after(() => {
  backend.close();
  fs.rmSync(certs.dir, { recursive: true, force: true });
});

const conf = (upstream: number) => `
events {}
http {
    log_format v '$request|$status|$body_bytes_sent|$request_completion|$sent_http_connection|$sent_http_transfer_encoding|$http2|$server_protocol|$connection_requests|$https|$request_body';
    access_log %%PREFIX%%/access.log v;
    gzip on;
    gzip_types text/plain;
    gzip_min_length 10;
    client_max_body_size 1m;
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl http2;
        server_name localhost;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        root %%PREFIX%%/html;
        location /ret { return 200 "hello"; }
        location /err { error_page 404 /errpage; return 404; }
        location /errpage { return 200 "custom error"; }
        location /always { add_header X-A a always; add_header X-B b; return 403; }
        location /echo { return 200 "cookie=$http_cookie x_u=$http_x_u"; }
        location /p/ { proxy_pass http://127.0.0.1:${upstream}/; client_max_body_size 20m; }
        location /pu/ { proxy_pass http://127.0.0.1:${upstream}/; proxy_request_buffering off; client_max_body_size 20m; }
        location /pu11/ { proxy_pass http://127.0.0.1:${upstream}/; proxy_request_buffering off; proxy_http_version 1.1; client_max_body_size 20m; }
        location /small/ { proxy_pass http://127.0.0.1:${upstream}/; }
    }
}
`;

const files = () => ({
  'localhost.crt': certs.read('localhost.crt'),
  'localhost.key': certs.read('localhost.key'),
  'html/big': Buffer.alloc(3 * 1024 * 1024, 'a'),
  'html/small.txt': 'small text file here\n'.repeat(10),
});

/** What a client sees of a response, minus what differs by nature (Date, the server's name). */
function seen(r: H2Response): string {
  const fields = Object.entries(r.headers).filter(([k]) => k !== 'date' && k !== ':status').map(([k, v]): [string, string] => [k, String(v)]);
  // (a gzip header's flags byte is the gzip module's business, not HTTP/2's)
  const gzip = r.headers['content-encoding'] === 'gzip';
  const m = maskNameInResponse(fields, gzip ? '' : r.body.toString('latin1'), gzip ? undefined : Number(r.status));
  const h = m.headers.filter(([k]) => k !== 'server').map(([k, v]) => `${k}: ${v}`).sort();
  const body = gzip ? zlib.gunzipSync(r.body).toString('latin1') : m.body;
  return `${r.status} ${r.error ?? ''}\n${h.join('\n')}\n${gzip ? r.body.length : m.body.length}:${body.length < 300 ? body : ''}`;
}

async function exchange(srv: RunningServer): Promise<{ seen: string[]; log: string[] }> {
  const session = h2connect(srv.port(8443));
  const out: string[] = [];
  const ask = async (h: Record<string, string | string[]>, body?: Buffer | string) => out.push(seen(await h2request(session, h, body)));
  await ask({ ':path': '/big' });
  await ask({ ':path': '/small.txt' });
  await ask({ ':path': '/small.txt', 'accept-encoding': 'gzip' });
  await ask({ ':path': '/small.txt', ':method': 'HEAD' });
  await ask({ ':path': '/small.txt', range: 'bytes=0-4' });
  await ask({ ':path': '/small.txt', 'if-modified-since': 'Mon, 06 May 2024 07:08:09 GMT' });
  await ask({ ':path': '/ret' });
  await ask({ ':path': '/err' });
  await ask({ ':path': '/always' });
  await ask({ ':path': '/nothere', 'user-agent': 'Mozilla/5.0 Chrome/120' });
  // browsers split cookies into crumbs; fields with '_' are dropped (underscores_in_headers off)
  await ask({ ':path': '/echo', cookie: ['a=1', 'b=2'], x_u: 'v' });
  await ask({ ':path': '/p/c', cookie: ['a=1', 'b=2'] });
  // bodies: without Content-Length the length is unknown until END_STREAM (nginx's chunked)
  const big = Buffer.alloc(2 << 20, 'b');
  await ask({ ':path': '/p/x', ':method': 'POST' }, 'xyz');
  await ask({ ':path': '/p/x', ':method': 'POST' }, big);
  await ask({ ':path': '/p/x', ':method': 'POST', 'content-length': String(big.length) }, big);
  await ask({ ':path': '/pu/x', ':method': 'POST' }, big);
  await ask({ ':path': '/pu11/x', ':method': 'POST' }, big);
  await ask({ ':path': '/small/x', ':method': 'POST', 'content-length': String(big.length) }, big);
  await ask({ ':path': '/small/x', ':method': 'POST' }, big);
  // the streams answered before their body was read hold no concurrency slot
  const concurrent = await Promise.all(Array.from({ length: 20 }, () => h2request(session, { ':path': '/small.txt' })));
  out.push(concurrent.map((r) => `${r.status}/${r.body.length}`).join(' '));
  session.close();
  const lines = await srv.waitForLog('access.log', new RegExp(`(.*\\n){${out.length - 1 + concurrent.length}}`));
  // `$status|$body_bytes_sent`: a page of the server's own counted with its name masked
  const counted = (l: string) => l.replace(/\|(\d{3})\|(\d+)\|/, (_m, st: string, b: string) => `|${st}|${maskNameInPageLength(Number(st), Number(b), signOf(srv))}|`);
  return { seen: out, log: lines.trim().split('\n').map(counted).sort() };
}

test('HTTP/2 responses and access log variables as nginx', async (t) => {
  const { gh, ng } = await startPair(t, { conf: conf((backend.address() as AddressInfo).port), files: files() });
  const mine = await exchange(gh);
  // without the reference: the numbers nginx gives, by hand
  assert.match(mine.log.join('\n'), /^GET \/big HTTP\/2\.0\|200\|3145728\|OK\|close\|-\|h2\|HTTP\/2\.0\|1\|on\|-$/m);
  assert.match(mine.log.join('\n'), /^POST \/p\/x HTTP\/2\.0\|200\|48\|OK\|close\|-\|h2\|HTTP\/2\.0\|13\|on\|xyz$/m);
  // a body without Content-Length reaches the upstream whole, with its length
  assert.ok(mine.seen.includes('200 \ncontent-type: text/plain\nx-up: yes\n48:POST /x len=3 cl=3 te=undefined cookie=undefined'), mine.seen.join('\n---\n'));
  if (!ng) return;
  const ref = await exchange(ng);
  assert.deepEqual(mine.seen, ref.seen);
  assert.deepEqual(mine.log, ref.log);
});

/**
 * The connection between requests, as nginx 1.22 runs it: keepalive
 * (keepalive_requests, the Keep-Alive header, HTTP/1.0, keepalive_disable),
 * pipelining, the body of a request nobody reads, lingering close after an
 * error, client_header_timeout, a client that half-closes after its request,
 * and `Expect: 100-continue`. Reference test against Debian's nginx.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { exchange, same, sharedPair, statusOf } from './core-kit.ts';
import type { RunningServer } from '../kit/server.ts';

const pair = sharedPair({
  conf: `
events {}
http {
    access_log %%PREFIX%%/access.log;
    client_header_timeout 1s;
    client_max_body_size 1k;
    keepalive_requests 3;
    keepalive_timeout 30s 17;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / { return 200 "$request_uri $connection_requests\\n"; }
        location /nolength {
            # gzip drops the length
            gzip on;
            gzip_min_length 0;
            gzip_types text/plain;
            gzip_http_version 1.0;
            return 200 "$request_uri";
            location /nolength/off { chunked_transfer_encoding off; gzip on; return 200 "$request_uri"; }
        }
        location /safari { keepalive_disable safari; return 200 "ok\\n"; }
        location /zero { keepalive_timeout 0; return 200 "ok\\n"; }
        location /error { return 500; }
        location /missing { return 404; }
    }
}
`,
});

const get = (uri: string, extra = '') => `GET ${uri} HTTP/1.1\r\nHost: localhost\r\n${extra}\r\n`;

test('keepalive_requests: the third response closes', async () => {
  const answer = await same(pair(), [get('/1'), get('/2'), get('/3'), get('/4')]);
  assert.equal(answer.text.match(/Connection: keep-alive\r\nKeep-Alive: timeout=17/g)?.length, 2);
  assert.match(answer.text, /\/3 3\n$/);
  assert.equal(answer.end, 'close');
});

test('pipelined requests are answered in order, one at a time', async () => {
  const answer = await same(pair(), get('/a') + get('/b') + get('/c', 'Connection: close\r\n'));
  assert.deepEqual([...answer.text.matchAll(/\r\n\r\n(\/\w) (\d)/g)].map((m) => m[1] + m[2]), ['/a1', '/b2', '/c3']);
});

test('a body nobody reads is skipped before the next request', async () => {
  const answer = await same(pair(), `POST /p HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello`
    + `POST /q HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n`
    + get('/r', 'Connection: close\r\n'));
  assert.deepEqual([...answer.text.matchAll(/\r\n\r\n(\/\w) /g)].map((m) => m[1]), ['/p', '/q', '/r']);
});

test('a malformed chunked body is 400 and ends the connection', async () => {
  const answer = await same(pair(), `POST /p HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nSEE-THIS\r\n0\r\n\r\n${get('/r')}`);
  assert.equal(statusOf(answer.text), 400);
  assert.doesNotMatch(answer.text, /\/r/);
});

test('chunked bodies are framed as nginx frames them: bare LF line ends, blanks before an extension', async () => {
  const answer = await same(pair(), `POST /p HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\n3 ;x\r\nabc\r\n0\nT: v\n\n`
    + `POST /q HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n2\t;y\r\nhi\r\n0\r\n\r\n`
    + get('/r', 'Connection: close\r\n'));
  assert.deepEqual([...answer.text.matchAll(/\r\n\r\n(\/\w) /g)].map((m) => m[1]), ['/p', '/q', '/r']);
});

test('an upgrade request answered without 101 keeps its connection', async () => {
  const answer = await same(pair(), get('/u', 'Connection: upgrade\r\nUpgrade: websocket\r\n') + get('/r', 'Connection: close\r\n'));
  assert.deepEqual([...answer.text.matchAll(/\r\n\r\n(\/\w) (\d)/g)].map((m) => m[1] + m[2]), ['/u1', '/r2']);
});

/** The response heads in `text` (bodies left out: gzip output differs between zlib builds). */
function heads(text: string): string[] {
  return [...text.matchAll(/HTTP\/1\.1 [^]*?\r\n\r\n/g)].map((m) => m[0]);
}

test('HTTP/1.0: keep-alive when asked and the length is known, close otherwise', async () => {
  const keep = await same(pair(), 'GET /k HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /l HTTP/1.0\r\n\r\n');
  assert.match(keep.text, /Connection: keep-alive[^]*\/l 2\n$/);
  const gz = 'Accept-Encoding: gzip\r\n';
  const [mine, ref] = await Promise.all([pair().gh, pair().ng].map((srv) => srv
    && exchange(srv, `GET /nolength HTTP/1.0\r\nConnection: keep-alive\r\n${gz}\r\nGET /l HTTP/1.0\r\n\r\n`)));
  assert.equal(heads(mine!.text).length, 1);
  assert.match(heads(mine!.text)[0], /Content-Encoding: gzip/);
  assert.doesNotMatch(heads(mine!.text)[0], /Content-Length|Transfer-Encoding/);
  assert.match(heads(mine!.text)[0], /Connection: close/);
  if (ref) assert.deepEqual(heads(mine!.text), heads(ref.text));
});

test('HTTP/1.1 without a length: chunked; chunked_transfer_encoding off: close', async () => {
  for (const uri of ['/nolength', '/nolength/off']) {
    const request = get(uri, 'Accept-Encoding: gzip\r\n') + get('/x', 'Connection: close\r\n');
    const [mine, ref] = await Promise.all([pair().gh, pair().ng].map((srv) => srv && exchange(srv, request)));
    if (ref) assert.deepEqual(heads(mine!.text), heads(ref.text));
    if (uri === '/nolength') assert.match(heads(mine!.text)[0], /Transfer-Encoding: chunked\r\nConnection: keep-alive/);
    else assert.deepEqual([heads(mine!.text).length, /Connection: close/.test(mine!.text)], [1, true]);
  }
});

test('keepalive_disable safari, keepalive_timeout 0, errors that close', async () => {
  const safari = await same(pair(), get('/safari', 'User-Agent: Mozilla/5.0 (Macintosh; Intel Mac OS X) Safari/605.1\r\n'));
  assert.match(safari.text, /Connection: close/);
  const msie = await same(pair(), `POST / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: MSIE 5.0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
  assert.match(msie.text, /Connection: close/);
  // one write: both requests arrive together (sent apart, whether the second is read before the close is a race, for nginx too)
  assert.match((await same(pair(), get('/zero') + get('/x'))).text, /Connection: close/);
  const error = await same(pair(), [get('/error'), get('/x')]);
  assert.equal(statusOf(error.text), 500);
  assert.equal(error.end, 'close');
  const missing = await same(pair(), get('/missing') + get('/x', 'Connection: close\r\n'));
  assert.match(missing.text, /404 Not Found[^]*Connection: keep-alive[^]*\/x 2\n$/);
});

test('a large body to a 413 location gets the 413, not a reset', async () => {
  for (const srv of [pair().gh, pair().ng]) {
    if (!srv) continue;
    const result = await sendLarge(srv, 2 * 1024 * 1024);
    assert.match(result.data, /^HTTP\/1\.1 413 Request Entity Too Large\r\n[^]*Connection: close/);
    assert.equal(result.error, undefined);
  }
});

/** Writes a request with a large body without waiting for the answer, then reads it. */
function sendLarge(srv: RunningServer, size: number): Promise<{ data: string; error: string | undefined }> {
  return new Promise((resolve) => {
    const s = net.connect(srv.port(8080), '127.0.0.1');
    let data = '';
    let error: string | undefined;
    s.on('connect', () => {
      s.write(`POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${size}\r\n\r\n`);
      s.write(Buffer.alloc(size, 0x61), () => s.end());
    });
    s.on('data', (d) => { data += d.toString('latin1'); });
    s.on('error', (e: NodeJS.ErrnoException) => { error = e.code; });
    s.on('close', () => resolve({ data, error }));
  });
}

test('client_header_timeout: silence is closed; a partial head is logged as 408', async () => {
  const silent = await same(pair(), [], 5000);
  assert.deepEqual(silent, { text: '', end: 'close' });
  const partial = await same(pair(), 'GET /slow HTTP/1.1\r\nHost: localhost\r\n', 5000);
  assert.deepEqual(partial, { text: '', end: 'close' });
  await pair().gh.waitForLog('access.log', /"GET \/slow HTTP\/1\.1" 408 0/);
  const lines = pair().gh.logLines().join('\n');
  assert.match(lines, /client timed out \(110: Connection timed out\) while waiting for request, client: 127\.0\.0\.1, server: 127\.0\.0\.1:\d+/);
  assert.match(lines, /client timed out \(110: Connection timed out\) while reading client request headers, client: 127\.0\.0\.1, server: localhost, request: "GET \/slow HTTP\/1\.1", host: "localhost"/);
});

test('a client that half-closes after its request still gets the answer', async () => {
  for (const srv of [pair().gh, pair().ng]) {
    if (!srv) continue;
    const text = await new Promise<string>((resolve) => {
      const s = net.connect(srv.port(8080), '127.0.0.1', () => s.end(get('/half')));
      let d = '';
      s.on('data', (b) => { d += b.toString('latin1'); });
      s.on('close', () => resolve(d));
    });
    assert.match(text, /^HTTP\/1\.1 200 OK[^]*\/half 1\n$/);
  }
});

test('Expect: 100-continue gets 100 when the body is read, not for an error', async () => {
  const ok = await same(pair(), `POST / HTTP/1.1\r\nHost: localhost\r\nExpect: 100-Continue\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
  assert.match(ok.text, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK/);
  const http10 = await same(pair(), `POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n`);
  assert.match(http10.text, /^HTTP\/1\.1 200 OK/);
  const error = await same(pair(), `POST /missing HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
  assert.match(error.text, /^HTTP\/1\.1 404 Not Found/);
});

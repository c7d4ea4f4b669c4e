/**
 * Reading the client's request body (src/http/request-body.ts), seen
 * through proxy_pass: client_max_body_size on chunked bodies (413),
 * `Expect: 100-continue` answered when the body is read,
 * client_body_buffer_size and the temporary file, client_body_in_file_only,
 * client_body_timeout (408). Reference: Debian's nginx on the same
 * configuration (statuses, interim responses, what the upstream receives).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { KeepAliveClient, parseResponse, rawRequest } from '../kit/client.ts';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, replyWith, startPair } from './upstream-kit.ts';
import type { Pair } from './upstream-kit.ts';

let up: RawUpstream;
let pair: Pair;
const stops: Array<() => unknown> = [];

before(async () => {
  up = await RawUpstream.start(replyWith((req) => {
    const sha = crypto.createHash('sha1').update(req.body).digest('hex');
    const text = `${req.body.length} ${sha}`;
    return `HTTP/1.1 200 OK\r\nContent-Length: ${text.length}\r\nConnection: close\r\n\r\n${text}`;
  }));
  pair = await startPair({ after: (fn) => { stops.push(fn); } }, { conf: `
events {}
http {
${HTTP_COMMON}
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        client_max_body_size 1k;
        client_body_buffer_size 1k;

        location / { proxy_pass http://${up.address}; }
        location /big/ { client_max_body_size 10m; proxy_pass http://${up.address}; }
        location /file/ {
            client_max_body_size 10m;
            client_body_in_file_only on;
            proxy_pass http://${up.address};
            add_header X-File $request_body_file;
        }
        location /slow/ { client_body_timeout 1s; proxy_pass http://${up.address}; }
    }
}
` });
});

after(async () => {
  await Promise.all(stops.map((s) => s()));
  await up.close();
});

const sha = (b: Buffer) => crypto.createHash('sha1').update(b).digest('hex');

async function both<T>(fn: (srv: RunningServer) => Promise<T>): Promise<T> {
  const gh = await fn(pair.gh);
  if (pair.ng) assert.deepEqual(gh, await fn(pair.ng), 'gatehouse vs nginx');
  return gh;
}

function chunked(size: number): string {
  return `POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`
    + `${size.toString(16)}\r\n${'a'.repeat(size)}\r\n0\r\n\r\n`;
}

test('client_max_body_size: a chunked body over the limit gets 413', async () => {
  const ok = await both(async (srv) => parseResponse(await rawRequest(srv.port(8080), chunked(1000))).status);
  assert.equal(ok, 200);
  const big = await both(async (srv) => parseResponse(await rawRequest(srv.port(8080), chunked(2000))).status);
  assert.equal(big, 413);
  assert.match(pair.gh.logLines().join('\n'), /\[error\] .*client intended to send too large chunked body: \d+\+\d+ bytes/);
});

test('Expect: 100-continue is answered when the body is read', async () => {
  const got = await both(async (srv) => {
    const c = await KeepAliveClient.connect(srv.port(8080));
    await c.send('POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n');
    const interim = await c.readResponse();
    await c.send('hello');
    const final = await c.readResponse();
    c.socket.destroy();
    return [interim.statusLine, final.status, final.body.toString()];
  });
  assert.deepEqual(got, ['HTTP/1.1 100 Continue', 200, `5 ${sha(Buffer.from('hello'))}`]);
});

test('a body over client_body_buffer_size goes through a temporary file, intact', async () => {
  const body = crypto.randomBytes(300 * 1024);
  const res = await both(async (srv) => {
    const head = `POST /big/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
    return parseResponse(await rawRequest(srv.port(8080), [head, body])).body.toString();
  });
  assert.equal(res, `${body.length} ${sha(body)}`);
  assert.match(pair.gh.logLines().join('\n'), /\[warn\] .*a client request body is buffered to a temporary file .*client_body_temp\/\d{10}/);
});

test('client_body_in_file_only on: the body file is kept and named by $request_body_file', async () => {
  const r = parseResponse(await rawRequest(pair.gh.port(8080), 'POST /file/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc'));
  assert.equal(r.body.toString(), `3 ${sha(Buffer.from('abc'))}`);
  const file = r.header('x-file');
  assert.ok(file, 'X-File names the body file');
  assert.equal(fs.readFileSync(file).toString(), 'abc');
});

test('client_body_timeout: 408 when the body stops arriving', async () => {
  const status = await both(async (srv) => {
    const data = await rawRequest(srv.port(8080), 'POST /slow/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\nConnection: close\r\n\r\nabc', { timeoutMs: 5000 });
    return data.length ? parseResponse(data).status : 0;
  });
  // nginx closes the connection without a response after a body timeout
  assert.equal(status, 0);
  assert.match(await pair.gh.waitForLog('error.log', /client timed out/), /\[info\] .*client timed out \(110: Connection timed out\) while reading client request body/);
});

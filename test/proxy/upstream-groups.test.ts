/**
 * Upstream groups and retries: smooth weighted round robin (each group
 * starting at its first server), backup and down servers, failure
 * accounting, proxy_next_upstream and its limits, non-idempotent requests,
 * upstream keepalive, and the $upstream_* variables and error log lines
 * that record all this. Reference: Debian's nginx on the same
 * configuration (the sequence of servers picked, statuses, log lines).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { parseResponse, rawRequest } from '../kit/client.ts';
import { freePort } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, replyWith, response, sleep, startPair } from './upstream-kit.ts';
import type { Pair } from './upstream-kit.ts';
import { maskNameInBody } from '../kit/server-name.ts';

const ups: RawUpstream[] = [];
let refused: number;
let pair: Pair;
const stops: Array<() => unknown> = [];

/** Upstream i answers with its name, or as the URI asks: /500 → 500, /close → closes without answering. */
function named(i: number) {
  return (req: { uri: string }, socket: import('node:net').Socket) => {
    if (req.uri.includes('/close')) { socket.destroy(); return; }
    if (req.uri.includes('/500') && i === 0) { socket.end(response(`u${i} failed`, '500 Internal Server Error'), 'latin1'); return; }
    if (req.uri.includes('/silent')) return;
    socket.end(response(`u${i}`), 'latin1');
  };
}

const conf = () => {
  const [a, b, c, ka] = ups.map((u) => u.address);
  return `
events {}
http {
${HTTP_COMMON}
    log_format ups '$request_method $uri $status [$upstream_addr] [$upstream_status] [$upstream_response_length] [$upstream_bytes_received]';
    access_log %%PREFIX%%/ups.log ups;

    upstream weighted { server ${a} weight=3; server ${b}; server ${c} weight=2; }
    upstream withbackup { server 127.0.0.1:${refused}; server ${b} backup; }
    upstream withdown { server ${a} down; server ${b}; }
    upstream failing { server 127.0.0.1:${refused}; server ${c}; }
    upstream nolive { server ${a} down; }
    upstream retry { server ${a}; server ${b}; server ${c}; }
    upstream once { server ${a}; server ${b}; }
    upstream ka { server ${ka}; keepalive 4; }

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        proxy_read_timeout 1s;

        location /weighted/ { proxy_pass http://weighted; }
        location /backup/ { proxy_pass http://withbackup; }
        location /down/ { proxy_pass http://withdown; }
        location /failing/ { proxy_pass http://failing; }
        location /nolive/ { proxy_pass http://nolive; }
        location /refused/ { proxy_pass http://127.0.0.1:${refused}; }
        location /timeout/ { proxy_pass http://${a}; }
        location /retry/ { proxy_pass http://retry; proxy_next_upstream error timeout http_500; }
        location /tries/ { proxy_pass http://once; proxy_next_upstream error timeout http_500; proxy_next_upstream_tries 1; }
        location /nonidem/ { proxy_pass http://retry; }
        location /nonidem-on/ { proxy_pass http://retry; proxy_next_upstream error non_idempotent; }
        location /ka/ { proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection ""; }
        location /ka10/ { proxy_pass http://ka; }
    }
}
`;
};

before(async () => {
  for (let i = 0; i < 3; i++) ups.push(await RawUpstream.start(named(i)));
  // a keepalive upstream: answers without closing
  ups.push(await RawUpstream.start((req, socket) => {
    socket.write(`HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nka`, 'latin1');
  }));
  refused = await freePort();
  pair = await startPair({ after: (fn) => { stops.push(fn); } }, { conf: conf() });
});

after(async () => {
  await Promise.all(stops.map((s) => s()));
  for (const u of ups) await u.close();
});

async function ask(srv: RunningServer, uri: string, method = 'GET', body = ''): Promise<{ status: number; body: string }> {
  const req = `${method} ${uri} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${body ? `Content-Length: ${body.length}\r\n` : ''}\r\n${body}`;
  const r = parseResponse(await rawRequest(srv.port(8080), req, { timeoutMs: 10000 }));
  return { status: r.status, body: maskNameInBody(r.body.toString()) };
}

/** The access log line for the last request to `uri`, with ports masked (they differ between runs only). */
async function logLine(srv: RunningServer, request: string): Promise<string> {
  const uri = request.includes(' ') ? request : `GET ${request}`;
  const line = await srv.waitForLog('ups.log', new RegExp(`^${uri.replace(/[/?]/g, '\\$&')} `, 'm'));
  return line.replace(/^GET /, '').replace(/127\.0\.0\.1:(\d+)/g, (_m, p) => {
    const i = ups.findIndex((u) => u.port === Number(p));
    return i >= 0 ? `u${i}` : Number(p) === refused ? 'refused' : `port${p}`;
  });
}

/** Runs `fn` against both servers and checks the results agree. */
async function both<T>(fn: (srv: RunningServer) => Promise<T>): Promise<T> {
  const gh = await fn(pair.gh);
  if (pair.ng) assert.deepEqual(gh, await fn(pair.ng), 'gatehouse vs nginx');
  return gh;
}

test('smooth weighted round robin, starting at the first server', async () => {
  const seq = await both(async (srv) => {
    const got: string[] = [];
    for (let i = 0; i < 12; i++) got.push((await ask(srv, `/weighted/${i}`)).body);
    return got;
  });
  assert.deepEqual(seq.slice(0, 6), ['u0', 'u2', 'u0', 'u1', 'u2', 'u0']);
});

test('a refused primary: the backup answers; $upstream_addr and $upstream_status list both tries', async () => {
  const r = await both((srv) => ask(srv, '/backup/x'));
  assert.deepEqual(r, { status: 200, body: 'u1' });
  assert.equal(await both((srv) => logLine(srv, '/backup/x')), '/backup/x 200 [refused, u1] [502, 200] [0, 2] [0, 59]');
});

test('down servers are skipped', async () => {
  const r = await both(async (srv) => [(await ask(srv, '/down/1')).body, (await ask(srv, '/down/2')).body]);
  assert.deepEqual(r, ['u1', 'u1']);
});

test('a failed server is skipped for fail_timeout', async () => {
  await both((srv) => ask(srv, '/failing/1'));
  await both((srv) => ask(srv, '/failing/2'));
  assert.equal(await both((srv) => logLine(srv, '/failing/1')), '/failing/1 200 [refused, u2] [502, 200] [0, 2] [0, 59]');
  assert.equal(await both((srv) => logLine(srv, '/failing/2')), '/failing/2 200 [u2] [200] [2] [59]');
});

test('502 page and nginx\'s log line for a refused connection', async () => {
  const r = await both((srv) => ask(srv, '/refused/'));
  assert.equal(r.status, 502);
  const line = await pair.gh.waitForLog('error.log', /connect\(\) failed.*GET \/refused\//);
  assert.match(line, new RegExp(`\\[error\\] \\d+#\\d+: \\*\\d+ connect\\(\\) failed \\(111: Connection refused\\) while connecting to upstream, client: 127\\.0\\.0\\.1, server: localhost, request: "GET /refused/ HTTP/1\\.1", upstream: "http://127\\.0\\.0\\.1:${refused}/refused/", host: "localhost"$`));
});

test('no live upstreams', async () => {
  assert.equal((await both((srv) => ask(srv, '/nolive/'))).status, 502);
  assert.match(await pair.gh.waitForLog('error.log', /no live upstreams/), /\[error\] .*no live upstreams while connecting to upstream, client: 127\.0\.0\.1, server: localhost, request: "GET \/nolive\/ HTTP\/1\.1", upstream: "http:\/\/nolive\/nolive\/"/);
  assert.equal(await both((srv) => logLine(srv, '/nolive/')), '/nolive/ 502 [nolive] [502] [0] [0]');
});

test('504 and the log line when the upstream does not answer in proxy_read_timeout', async () => {
  assert.equal((await both((srv) => ask(srv, '/timeout/silent'))).status, 504);
  assert.match(await pair.gh.waitForLog('error.log', /timed out/), /\[error\] .*upstream timed out \(110: Connection timed out\) while reading response header from upstream, client: 127\.0\.0\.1, server: localhost, request: "GET \/timeout\/silent HTTP\/1\.1", upstream: "http:\/\/127\.0\.0\.1:\d+\/timeout\/silent"/);
});

test('proxy_next_upstream http_500: the next server answers; with one try the 500 itself goes to the client', async () => {
  // round robin in "retry" starts at u0, which fails /500
  const r = await both((srv) => ask(srv, '/retry/500'));
  assert.deepEqual(r, { status: 200, body: 'u1' });
  assert.equal(await both((srv) => logLine(srv, '/retry/500')), '/retry/500 200 [u0, u1] [500, 200] [0, 2] [85, 59]');
  // "once" starts at u0 too: the one try it has gets the 500, which the client receives as sent
  assert.deepEqual(await both((srv) => ask(srv, '/tries/500')), { status: 500, body: 'u0 failed' });
});

test('a POST that reached an upstream is not retried unless non_idempotent', async () => {
  const post = await both((srv) => ask(srv, '/nonidem/close', 'POST', 'data'));
  assert.equal(post.status, 502);
  const get = await both((srv) => ask(srv, '/nonidem/close'));
  assert.equal(get.status, 502);
  assert.match(await both((srv) => logLine(srv, 'POST /nonidem/close')), /^POST \/nonidem\/close 502 \[u\d\] \[502\] /);
  // the GET goes on to the next server (here: none left alive, as earlier failures within fail_timeout count)
  assert.match(await both((srv) => logLine(srv, 'GET /nonidem/close')), /^\/nonidem\/close 502 \[u\d, [^\]]+\] \[502, 502\]/);
  const on = await both((srv) => ask(srv, '/nonidem-on/close', 'POST', 'data'));
  assert.equal(on.status, 502);
});

test('upstream keepalive: one connection serves many requests; without HTTP/1.1 none is kept', async () => {
  const ka = ups[3];
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const before = ka.connections;
    for (let i = 0; i < 5; i++) assert.equal((await ask(srv, '/ka/x')).body, 'ka');
    assert.equal(ka.connections - before, 1, 'one upstream connection for five requests');
  }
  await sleep(10);
});

// Tests of the test kit itself, against Debian's nginx (skipped without it).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { startNginx, freePort, freePorts, nginxSkip, type RunningServer } from './server.ts';
import { rawRequest, rawExchange, parseResponse, parseResponses, httpGet, KeepAliveClient } from './client.ts';
import { runLoad } from './load.ts';

const helloConf = (port: number): string => `
events {}
http {
    access_log %%PREFIX%%/access.log;
    server {
        listen 127.0.0.1:${port};
        listen unix:%%PREFIX%%/http.sock;
        location / { return 200 "hello\\n"; }
        location /chunked { root %%PREFIX%%/html; ssi on; }
    }
}
`;

test('parser: chunked body, trailers, interim 100, HEAD, pipelining (no server)', () => {
  const chunked = Buffer.from(
    'HTTP/1.1 100 Continue\r\n\r\n' +
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nx-a: 2\r\n\r\n' +
      '5\r\nhello\r\n1;ext=1\r\n\n\r\n0\r\nX-Trailer: t\r\n\r\n' +
      'HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n' +
      'HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n',
  );
  const [a, b, c] = parseResponses(chunked, { head: [false, false, true] });
  assert.equal(a!.interim.length, 1);
  assert.equal(a!.interim[0]!.status, 100);
  assert.equal(a!.status, 200);
  assert.equal(a!.body.toString(), 'hello\n');
  assert.equal(a!.rawBody.toString(), '5\r\nhello\r\n1;ext=1\r\n\n\r\n0\r\nX-Trailer: t\r\n\r\n');
  assert.deepEqual(a!.headerAll('X-A'), ['1', '2']);
  assert.deepEqual(a!.trailers, [['X-Trailer', 't']]);
  assert.equal(a!.complete, true);
  assert.equal(b!.status, 204);
  assert.equal(b!.body.length, 0);
  assert.equal(c!.header('content-length'), '3');
  assert.equal(c!.body.length, 0);

  const truncated = parseResponse('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc');
  assert.equal(truncated.complete, false);
  assert.equal(truncated.body.toString(), 'abc');
  const closeDelimited = parseResponse('HTTP/1.0 200 OK\r\n\r\nuntil close');
  assert.equal(closeDelimited.body.toString(), 'until close');
  assert.throws(() => parseResponse(''), /no response/);
});

test('kit against nginx', { skip: nginxSkip }, async (t) => {
  const [port] = await freePorts(1);
  const big = 'x'.repeat(100);
  const srv: RunningServer = await startNginx({ conf: helloConf(port!), files: { 'html/chunked/a.html': big } });
  t.after(() => srv.stop());

  await t.test('rawRequest + parseResponse: exact status and body', async () => {
    const raw = await rawRequest(port!, 'GET / HTTP/1.0\r\nHost: localhost\r\n\r\n');
    const r = parseResponse(raw);
    assert.equal(r.statusLine, 'HTTP/1.1 200 OK');
    assert.equal(r.status, 200);
    assert.equal(r.body.toString(), 'hello\n');
    assert.equal(r.header('content-length'), '6');
    assert.equal(r.header('Content-Type'), 'text/plain');
    assert.equal(r.header('connection'), 'close');
    assert.equal(r.rest.length, 0);
    assert.deepEqual(r.headers.map(([k]) => k), ['Server', 'Date', 'Content-Type', 'Content-Length', 'Connection']);
  });

  await t.test('pipelined pair on one connection gives two responses', async () => {
    const raw = await rawRequest(
      port!,
      'GET /a HTTP/1.1\r\nHost: localhost\r\n\r\nHEAD /b HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
    );
    const rs = parseResponses(raw, { head: [false, true] });
    assert.equal(rs.length, 2);
    assert.equal(rs[0]!.body.toString(), 'hello\n');
    assert.equal(rs[0]!.header('connection'), 'keep-alive');
    assert.equal(rs[1]!.status, 200);
    assert.equal(rs[1]!.header('content-length'), '6');
    assert.equal(rs[1]!.body.length, 0);
    assert.equal(rs[1]!.header('connection'), 'close');
  });

  await t.test('httpGet, chunked from HTTP/1.1, split writes, untilClose false', async () => {
    const r = await httpGet(port!, '/');
    assert.equal(r.httpVersion, '1.1');
    assert.equal(r.body.toString(), 'hello\n');

    const ex = await rawExchange(
      port!,
      ['GET /chunked/a.html HTTP/1.1\r\n', { delayMs: 20 }, 'Host: localhost\r\n\r\n'],
      { untilClose: false },
    );
    assert.equal(ex.end, 'complete');
    const c = parseResponse(ex.data);
    assert.equal(c.status, 200);
    assert.equal(c.chunked, true);
    assert.equal(c.body.toString(), big);
    assert.equal(c.rawBody.toString(), `64\r\n${big}\r\n0\r\n\r\n`);
  });

  await t.test('unix socket target', async () => {
    const r = await httpGet(srv.path('http.sock'), '/');
    assert.equal(r.body.toString(), 'hello\n');
  });

  await t.test('KeepAliveClient: two requests, then the server closes it', async () => {
    const c = await KeepAliveClient.connect(port!);
    await c.send('GET / HTTP/1.1\r\nHost: localhost\r\n\r\n');
    assert.equal((await c.readResponse()).body.toString(), 'hello\n');
    await c.send('GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    const r = await c.readResponse();
    assert.equal(r.header('connection'), 'close');
    assert.equal(await c.waitForClose(2000), true);
    await c.close();
  });

  await t.test('runLoad, reload, waitForLog', async () => {
    const load = runLoad({ port: port!, path: '/', concurrency: 4, durationMs: 600, keepAlive: true });
    await new Promise((r) => setTimeout(r, 150));
    srv.writeConf(helloConf(port!).replace('hello', 'hello again'));
    const log = await srv.reload();
    assert.match(log, /reconfiguring/);
    const res = await load;
    assert.equal(res.failed, 0, res.errors.join(', '));
    assert.ok(res.ok > 10);
    assert.equal(res.sent, res.ok + res.failed);
    assert.equal((await httpGet(port!, '/')).body.toString(), 'hello again\n');
    const line = await srv.waitForLog('access.log', /"GET \/ HTTP\/1\.0" 200/, 1000);
    assert.match(line, /^127\.0\.0\.1 /);
  });
});

test('stop() ends master and workers and removes the prefix', { skip: nginxSkip }, async () => {
  const port = await freePort();
  const srv = await startNginx({ conf: helloConf(port) });
  const pid = srv.pid;
  assert.equal(srv.process.pid, pid, 'daemon off: the spawned process is the master');
  const res = await srv.stop();
  assert.equal(res.forced, false);
  assert.equal(res.code, 0);
  assert.throws(() => process.kill(pid, 0), /ESRCH/);
  assert.throws(() => process.kill(-pid, 0), /ESRCH/, 'no worker left in the process group');
  assert.equal(fs.existsSync(srv.prefix), process.env.KEEP_TEST_PREFIX !== undefined);
  await assert.rejects(rawRequest(port, 'GET / HTTP/1.0\r\n\r\n'), /ECONNREFUSED/);
});

test('broken config: startNginx rejects with the emerg line', { skip: nginxSkip }, async () => {
  let prefix = '';
  await assert.rejects(
    startNginx({ conf: 'events {}\nhttp { bogus_directive on; }\n' }),
    (e: Error) => {
      assert.match(e.message, /\[emerg\] unknown directive "bogus_directive" in \/tmp\/gh-test-\w+\/nginx\.conf:2/);
      prefix = /\/tmp\/gh-test-\w+/.exec(e.message)![0];
      return true;
    },
  );
  if (!process.env.KEEP_TEST_PREFIX) assert.equal(fs.existsSync(prefix), false);
});

test('nginxModules loads stream; %%PORT_n%% placeholders', { skip: nginxSkip }, async () => {
  const srv = await startNginx({
    nginxModules: ['ngx_stream_module'],
    conf: `
events {}
stream { server { listen 127.0.0.1:%%PORT_8081%%; return "stream ok\\n"; } }
`,
  });
  try {
    const got = await rawRequest(srv.port(8081), '');
    assert.equal(got.toString(), 'stream ok\n');
  } finally {
    await srv.stop();
  }
});

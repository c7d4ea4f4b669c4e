// QUIT, TERM, USR1 and a dying worker, seen from outside: responses, exit,
// pid file, error log lines.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { startGatehouse, SERVER_START_LIMIT_MS } from '../kit/server.ts';
import { httpGet, KeepAliveClient, parseResponse, rawExchange } from '../kit/client.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const conf = (workers = 1, extra = '') => `
worker_processes ${workers};
${extra}
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { return 200 "ok\\n"; }
    }
}
`;

test('QUIT: a request still arriving gets its response (Connection: close), then the server exits and removes its pid file', async (t) => {
  const srv = await startGatehouse({ conf: conf() });
  t.after(() => srv.stop());
  const port = srv.port(8080);
  const pidFile = srv.path('nginx.pid');
  assert.equal(fs.readFileSync(pidFile, 'latin1'), `${srv.process.pid}\n`);

  // the head arrives in two parts; QUIT comes in between
  const exchange = rawExchange(port, ['GET / HTTP/1.1\r\nHost: localhost\r\n', { delayMs: 600 }, 'X-Late: 1\r\n\r\n']);
  await sleep(300);
  srv.signal('QUIT');
  const { data, end } = await exchange;
  const r = parseResponse(data);
  assert.equal(r.status, 200);
  assert.equal(r.body.toString(), 'ok\n');
  assert.equal(r.header('connection'), 'close');
  assert.equal(end, 'close');

  const exit = await srv.exited;
  assert.equal(exit.code, 0);
  assert.equal(fs.existsSync(pidFile), false);
  const log = srv.logLines().join('\n');
  assert.match(log, /\[notice\] \d+#\d+: signal 3 \(SIGQUIT\) received, shutting down$/m);
  assert.match(log, /\[notice\] \d+#\d+: gracefully shutting down$/m);
  assert.match(log, /\[notice\] \d+#\d+: exiting$/m);
  assert.match(log, /\[notice\] \d+#\d+: worker process \d+ exited with code 0$/m);
  assert.match(log, /\[notice\] \d+#\d+: exit$/m);
  assert.doesNotMatch(log, /\[(alert|emerg)\]/);
});

test('QUIT: a response being sent to a slow reader completes before the server exits', async (t) => {
  const size = 48 << 20; // well past what the socket buffers hold
  const srv = await startGatehouse({
    conf: conf(1).replace('location / { return 200 "ok\\n"; }', 'location / { root %%PREFIX%%/html; }'),
    files: { 'html/big.bin': Buffer.alloc(size, 'x') },
  });
  t.after(() => srv.stop());
  const sock = net.connect(srv.port(8080), '127.0.0.1');
  let received = 0;
  const ended = new Promise<void>((resolve) => sock.on('end', () => resolve()));
  sock.on('data', (b: Buffer) => {
    received += b.length;
    // stop reading after the first bytes: the server is left with most of the file to send
    if (received === b.length) sock.pause();
  });
  sock.write('GET /big.bin HTTP/1.0\r\nHost: localhost\r\n\r\n');
  while (received === 0) await sleep(10);
  srv.signal('QUIT');
  await srv.waitForLog('error.log', /gracefully shutting down/);
  sock.resume();
  await ended;
  assert.ok(received > size && received < size + 1024, `${received} bytes for a ${size}-byte file`);
  assert.equal((await srv.exited).code, 0);
});

test('QUIT: an idle keepalive connection is closed at once; a silent one still gets its request served', async (t) => {
  // as Debian's nginx 1.22 does (checked by hand): ngx_close_idle_connections closes only keepalive
  // connections (c->idle); a connection that has sent nothing yet is left to bring its request,
  // which is answered with Connection: close, or to reach client_header_timeout
  const srv = await startGatehouse({ conf: conf() });
  t.after(() => srv.stop());
  const port = srv.port(8080);
  const idle = await KeepAliveClient.connect(port);
  await idle.send('GET / HTTP/1.1\r\nHost: localhost\r\n\r\n');
  assert.equal((await idle.readResponse()).status, 200);
  const silent = await KeepAliveClient.connect(port);
  await sleep(400); // both idle for longer than the grace a just-used connection gets
  srv.signal('QUIT');
  // the server's FIN ends the keepalive one (the client keeps its half open, so poll `ended`)
  while (!idle.ended) await sleep(10);
  assert.equal(idle.closeError, undefined);
  await srv.waitForLog('error.log', /gracefully shutting down$/m);
  assert.equal(silent.ended, false);
  await silent.send('GET / HTTP/1.1\r\nHost: localhost\r\n\r\n');
  const r = await silent.readResponse();
  assert.equal(r.status, 200);
  assert.equal(r.header('connection'), 'close');
  assert.equal((await srv.exited).code, 0);
});

test('TERM: the server exits at once, cutting a request in progress', async (t) => {
  const srv = await startGatehouse({ conf: conf(2) });
  t.after(() => srv.stop());
  const port = srv.port(8080);
  const slow = rawExchange(port, ['GET / HTTP/1.1\r\nHost: localhost\r\n', { delayMs: 3000 }, '\r\n'], { timeoutMs: 5000 });
  await sleep(300);
  const stopped = await srv.stop('TERM');
  assert.equal(stopped.forced, false);
  assert.equal(stopped.code, 0);
  const { data } = await slow;
  assert.equal(data.length, 0);
});

test('USR1 reopens the error log in the master and every worker', async (t) => {
  const srv = await startGatehouse({ conf: conf(2) });
  t.after(() => srv.stop());
  fs.renameSync(srv.path('error.log'), srv.path('error.log.1'));
  srv.signal('USR1');
  // "reopening logs" is written before the reopen (as nginx does), by the master and both workers;
  // the master's "signal 10 (SIGUSR1) received, reopening logs" also ends so, and is not one of the three
  const threeReopens = /(: reopening logs$[^]*){3}/m;
  // each thread handles the signal in its own event loop; on two cores busy with the rest of the
  // suite a thread can be scheduled seconds late, so wait as long as a server start may take
  await srv.waitForLog('error.log.1', threeReopens, SERVER_START_LIMIT_MS);
  assert.equal(fs.existsSync(srv.path('error.log')), true);
  // a second USR1 is logged by every thread in the new file
  srv.signal('USR1');
  await srv.waitForLog('error.log', threeReopens, SERVER_START_LIMIT_MS);
  const fresh = srv.logLines('error.log');
  const threads = new Set(fresh.filter((l) => /: reopening logs$/.test(l)).map((l) => /#(\d+):/.exec(l)![1]));
  assert.equal(threads.size, 3, fresh.join('\n'));
  assert.equal((await httpGet(srv.port(8080), '/')).status, 200);
});

for (const how of ['throw', 'exit'] as const) {
  test(`a worker that dies (${how === 'throw' ? 'uncaught exception' : 'process.exit in the thread'}) is replaced`, async (t) => {
    // GATEHOUSE_TEST_CRASH arms a test-only trigger: USR2 makes worker 0 die (see src/process/master.ts)
    const srv = await startGatehouse({ conf: conf(1), env: { GATEHOUSE_TEST_CRASH: how } });
    t.after(() => srv.stop());
    const port = srv.port(8080);
    assert.equal((await httpGet(port, '/')).status, 200);
    srv.signal('USR2');
    await srv.waitForLog('error.log', /\[alert\] \d+#\d+: worker process \d+ exited with code [1-9]\d*$/m);
    if (how === 'throw') assert.match(srv.readFile('error.log'), /\[alert\] \d+#\d+: worker process \d+ failed: Error: worker crash requested/);
    // the replacement starts after the master's 1 s respawn pause, and then loads like any worker
    await srv.waitForLog('error.log', /exited with code [^]*start worker process \d+$/m, 1000 + SERVER_START_LIMIT_MS);
    for (let i = 0; i < 10; i++) assert.equal((await httpGet(port, '/')).body.toString(), 'ok\n');
    // the replacement serves reloads and stops normally
    await srv.reload();
    const stopped = await srv.stop();
    assert.equal(stopped.forced, false);
  });
}

test('master_process off: serves, reloads, stops', async (t) => {
  const srv = await startGatehouse({ conf: conf(4, 'master_process off;') });
  t.after(() => srv.stop());
  const port = srv.port(8080);
  assert.equal((await httpGet(port, '/')).status, 200);
  // one worker, whatever worker_processes says (nginx serves in the single process)
  assert.equal(srv.logLines().filter((l) => /start worker process \d+$/.test(l)).length, 1);
  srv.writeConf(conf(4, 'master_process off;').replace('"ok', '"reloaded'));
  await srv.reload();
  assert.equal((await httpGet(port, '/')).body.toString(), 'reloaded\n');
  assert.equal((await srv.stop()).forced, false);
});

// HUP reloads: lossless under load, a bad configuration keeps the old one,
// worker_processes and listen addresses change, a busy new address is refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { startGatehouse, freePort, SERVER_START_LIMIT_MS } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';
import { runLoad } from '../kit/load.ts';
import type { LoadOptions, LoadResult } from '../kit/load.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const conf = (answer: string, workers = 2, extra = '') => `
worker_processes ${workers};
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { return 200 "${answer}\\n"; }
    }
    ${extra}
}
`;

/** Polls until GET / answers `body` (the reload took effect); returns how many polls it took. */
async function waitForAnswer(port: number, body: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      last = (await httpGet(port, '/')).body.toString();
      if (last === body) return;
    } catch (e) {
      last = String(e);
    }
    await sleep(10);
  }
  throw new Error(`GET / still answers ${JSON.stringify(last)}, expected ${JSON.stringify(body)}`);
}

/** Keeps `runLoad` running in short back-to-back rounds while `work` runs; returns the totals. */
async function underLoad(opts: Omit<LoadOptions, 'durationMs'>, work: () => Promise<void>): Promise<LoadResult> {
  const total: LoadResult = { sent: 0, ok: 0, failed: 0, errors: [], statuses: {}, staleRetries: 0, connections: 0 };
  let done = false;
  const loop = (async () => {
    while (!done) {
      const r = await runLoad({ ...opts, durationMs: 300 });
      total.sent += r.sent; total.ok += r.ok; total.failed += r.failed;
      total.staleRetries += r.staleRetries; total.connections += r.connections;
      total.errors.push(...r.errors.slice(0, 20));
    }
  })();
  try {
    await sleep(100);
    await work();
  } finally {
    done = true;
    await loop;
  }
  return total;
}

function assertCleanLog(srv: RunningServer): void {
  const bad = srv.logLines().filter((l) => /\[(alert|emerg|crit)\]/.test(l));
  assert.deepEqual(bad, []);
}

for (const keepAlive of [false, true]) {
  test(`50 reloads under load lose no request (${keepAlive ? 'keepalive' : 'a connection per request'})`, async (t) => {
    const srv = await startGatehouse({ conf: conf('A') });
    t.after(() => srv.stop());
    const port = srv.port(8080);
    await waitForAnswer(port, 'A\n');
    let reloads = 0;
    // retryStale false: a client that does not retry on a closed keepalive connection loses nothing either
    const load = await underLoad({ port, path: '/', concurrency: 8, keepAlive, retryStale: false }, async () => {
      for (let i = 1; i <= 50; i++) {
        const answer = i % 2 ? 'B' : 'A';
        srv.writeConf(conf(answer));
        srv.signal('HUP');
        await waitForAnswer(port, `${answer}\n`);
        reloads++;
      }
    });
    assert.equal(reloads, 50);
    assert.ok(load.sent > 100, `only ${load.sent} requests were sent`);
    assert.equal(load.failed, 0, `failures: ${load.errors.slice(0, 10).join(', ')}`);
    assert.equal(load.staleRetries, 0);
    assertCleanLog(srv);
  });
}

test('a bad configuration is refused with [emerg] file:line and the old one keeps serving', async (t) => {
  const srv = await startGatehouse({ conf: conf('old') });
  t.after(() => srv.stop());
  const port = srv.port(8080);
  const bad = conf('new') + '\nno_such_directive 1;\n';
  const line = bad.split('\n').findIndex((l) => l.startsWith('no_such_directive')) + 1;
  srv.writeConf(bad);
  const log = await srv.reload();
  assert.match(log, /\[notice\] \d+#\d+: signal 1 \(SIGHUP\) received, reconfiguring$/m);
  assert.ok(log.includes(`[emerg] ${srv.pid}#`), log);
  assert.ok(log.includes(`: unknown directive "no_such_directive" in ${srv.prefix}/nginx.conf:${line}\n`), log);
  assert.doesNotMatch(log, /gracefully shutting down/);
  assert.equal((await httpGet(port, '/')).body.toString(), 'old\n');
  // fixed, it loads
  srv.writeConf(conf('fixed'));
  await srv.reload();
  await waitForAnswer(port, 'fixed\n');
});

test('a reload switches the master and workers to the new error_log', async (t) => {
  const srv = await startGatehouse({ conf: conf('a') });
  t.after(() => srv.stop());
  srv.writeConf('error_log %%PREFIX%%/second.log notice;\n' + conf('b'));
  await srv.reload();
  await waitForAnswer(srv.port(8080), 'b\n');
  srv.signal('USR1');
  // the master and both workers log the reopen in the new file; the master writes two such
  // lines (the signal and the reopen), so wait for three distinct threads, not three lines
  const threads = () => new Set(srv.logLines('second.log').filter((l) => /: reopening logs$/.test(l)).map((l) => /#(\d+):/.exec(l)![1]));
  for (let waited = 0; threads().size < 3 && waited < 5000; waited += 50) await new Promise((r) => setTimeout(r, 50));
  assert.equal(threads().size, 3);
});

test('worker_processes changes on reload start and retire workers', async (t) => {
  const srv = await startGatehouse({ conf: conf('one', 1) });
  t.after(() => srv.stop());
  const port = srv.port(8080);
  const started = () => srv.logLines().filter((l) => /start worker process \d+$/.test(l)).length;
  assert.equal(started(), 1);
  srv.writeConf(conf('three', 3));
  srv.signal('HUP');
  await waitForAnswer(port, 'three\n');
  await srv.waitForLog('error.log', /(start worker process \d+\n.*){3}/s, SERVER_START_LIMIT_MS);
  assert.equal(started(), 3);
  srv.writeConf(conf('two', 2));
  srv.signal('HUP');
  await waitForAnswer(port, 'two\n');
  // the extra worker finishes and exits; nothing is respawned
  await srv.waitForLog('error.log', /\[notice\] \d+#\d+: worker process \d+ exited with code 0$/m);
  assert.equal(started(), 3);
  for (let i = 0; i < 20; i++) assert.equal((await httpGet(port, '/')).body.toString(), 'two\n');
  assertCleanLog(srv);
});

test('listen addresses added and removed by a reload; a busy new address keeps the old configuration', async (t) => {
  const srv = await startGatehouse({ conf: conf('a'), files: { unused: '%%PORT_8081%% %%PORT_8082%%' } });
  t.after(() => srv.stop());
  const [p1, p2, p3] = [srv.port(8080), srv.port(8081), srv.port(8082)];
  const second = (port: number, answer: string) => `server { listen 127.0.0.1:${port}; location / { return 200 "${answer}\\n"; } }`;

  srv.writeConf(conf('a', 2, second(p2, 'second')));
  await srv.reload();
  await waitForAnswer(p2, 'second\n');

  // a program holds p3: the reload is refused as nginx refuses it, nothing changes
  const squatter = net.createServer();
  await new Promise<void>((r) => squatter.listen(p3, '127.0.0.1', () => r()));
  t.after(() => squatter.close());
  srv.writeConf(conf('changed', 2, second(p3, 'third')));
  const log = await srv.reload({ until: /still could not bind\(\)/, timeoutMs: 8000 });
  assert.match(log, new RegExp(`\\[emerg\\] \\d+#\\d+: bind\\(\\) to 127\\.0\\.0\\.1:${p3} failed \\(98: Address already in use\\)$`, 'm'));
  assert.equal((await httpGet(p1, '/')).body.toString(), 'a\n');
  assert.equal((await httpGet(p2, '/')).body.toString(), 'second\n');

  // without the squatter: p2 closes, p3 opens
  await new Promise<void>((r) => squatter.close(() => r()));
  await srv.reload();
  await waitForAnswer(p3, 'third\n');
  await waitForAnswer(p1, 'changed\n');
  await assert.rejects(httpGet(p2, '/'), /ECONNREFUSED/);
});

test('a reload arriving during startup is applied once the server runs', async (t) => {
  const port = await freePort();
  const srv = await startGatehouse({ conf: conf('first').replace('%%PORT_8080%%', String(port)) });
  t.after(() => srv.stop());
  srv.writeConf(conf('second').replace('%%PORT_8080%%', String(port)));
  srv.signal('HUP');
  srv.signal('HUP');
  await waitForAnswer(port, 'second\n');
});

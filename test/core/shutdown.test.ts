// What clients of the old configuration see during a reload and a graceful
// stop, and worker_shutdown_timeout. Reference: Debian's nginx 1.22 on the
// same configuration (its old worker process plays our old generation), and
// nginx-tests' worker_shutdown_timeout.t.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startGatehouse, startNginx, nginxSkip } from '../kit/server.ts';
import { httpGet, KeepAliveClient, parseResponse, rawExchange } from '../kit/client.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const conf = (answer: string, extra = '') => `
${extra}
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { return 200 "${answer}\\n"; }
    }
}
`;

const flavors = [
  ['gatehouse', startGatehouse, false],
  ['nginx', startNginx, nginxSkip],
] as const;

for (const [name, start, skip] of flavors) {
  test(`reload: a request arriving on an old connection is answered by the old configuration, with Connection: close (${name})`, { skip }, async (t) => {
    const srv = await start({ conf: conf('old') });
    t.after(() => srv.stop());
    const port = srv.port(8080);
    const late = rawExchange(port, ['GET / HTTP/1.1\r\nHost: localhost\r\n', { delayMs: 800 }, '\r\n']);
    await sleep(300);
    srv.writeConf(conf('new'));
    await srv.reload();
    assert.equal((await httpGet(port, '/')).body.toString(), 'new\n');
    const r = parseResponse((await late).data);
    assert.equal(r.status, 200);
    assert.equal(r.body.toString(), 'old\n');
    assert.equal(r.header('connection'), 'close');
  });

  test(`reload: an idle keepalive connection is closed (${name})`, { skip }, async (t) => {
    const srv = await start({ conf: conf('old') });
    t.after(() => srv.stop());
    const c = await KeepAliveClient.connect(srv.port(8080));
    await c.send('GET / HTTP/1.1\r\nHost: localhost\r\n\r\n');
    assert.equal((await c.readResponse()).body.toString(), 'old\n');
    // The old generation closes the idle connection once the new one runs; under load
    // starting the new workers took seconds (a 5 s poll once ran out in CI).
    await srv.reload({ timeoutMs: 30_000 });
    assert.ok(await c.waitForClose(30_000), 'the idle connection is still open after the reload');
  });

  // worker_shutdown_timeout.t: a connection that sent nothing is closed after the reload
  test(`reload with worker_shutdown_timeout: a silent connection is closed (${name})`, { skip }, async (t) => {
    const srv = await start({ conf: conf('old', 'worker_shutdown_timeout 100ms;') });
    t.after(() => srv.stop());
    const port = srv.port(8080);
    const silent = rawExchange(port, [], { timeoutMs: 5000 });
    await sleep(300);
    await srv.reload();
    const { data, end } = await silent;
    assert.equal(data.length, 0);
    assert.equal(end, 'close');
    assert.equal((await httpGet(port, '/')).status, 200);
  });

  test(`QUIT with worker_shutdown_timeout: a silent connection does not keep the server (${name})`, { skip }, async (t) => {
    const srv = await start({ conf: conf('old', 'worker_shutdown_timeout 100ms;') });
    t.after(() => srv.stop());
    const silent = rawExchange(srv.port(8080), [], { timeoutMs: 5000 });
    await sleep(300);
    const stopped = await srv.stop('QUIT');
    assert.equal(stopped.forced, false);
    assert.equal((await silent).data.length, 0);
  });
}

// nginx 1.22 leaves a connection in the middle of its request head open past
// worker_shutdown_timeout (its shutdown timer only closes connections waiting
// for a request); Gatehouse closes everything the old configuration holds.
test('worker_shutdown_timeout also closes a connection stuck in its request head (reload and QUIT)', async (t) => {
  const srv = await startGatehouse({ conf: conf('old', 'worker_shutdown_timeout 100ms;') });
  t.after(() => srv.stop());
  const port = srv.port(8080);
  const stuck1 = rawExchange(port, ['GET / HTTP/1.1\r\nHost: localhost\r\n'], { timeoutMs: 5000 });
  await sleep(300);
  await srv.reload();
  assert.deepEqual(await stuck1.then((x) => [x.data.length, x.end]), [0, 'close']);
  const stuck2 = rawExchange(port, ['GET / HTTP/1.1\r\nHost: localhost\r\n'], { timeoutMs: 5000 });
  await sleep(300);
  const stopped = await srv.stop('QUIT');
  assert.equal(stopped.forced, false);
  assert.deepEqual(await stuck2.then((x) => [x.data.length, x.end]), [0, 'close']);
});

test('reload without worker_shutdown_timeout: an old request still arriving is waited for', async (t) => {
  const srv = await startGatehouse({ conf: conf('old') });
  t.after(() => srv.stop());
  const port = srv.port(8080);
  const slow = rawExchange(port, ['GET / HTTP/1.1\r\nHost: localhost\r\n', { delayMs: 1500 }, 'X-A: b\r\n\r\n']);
  await sleep(300);
  srv.writeConf(conf('new'));
  await srv.reload();
  const r = parseResponse((await slow).data);
  assert.equal(r.body.toString(), 'old\n');
  assert.equal(r.header('connection'), 'close');
});

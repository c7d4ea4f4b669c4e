// logrotate under load: `mv access.log access.log.1; kill -USR1 master` while
// two workers serve a steady stream of requests. Every request's line must
// end up, whole, in exactly one of the two files (buffered logs too: what
// they hold goes to the old file), and the error log moves as well.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { startGatehouse } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';
import { runLoad } from '../kit/load.ts';
import { lines } from './helpers.ts';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const LINE = /^"GET \/load\?n=\d+ HTTP\/1\.1" 200 \d+ \d+ \d+\.\d{3} \d+\.\d{3}$/;

test('USR1 after rename under load: no line lost, torn or written twice', async (t) => {
  const srv = await startGatehouse({
    conf: `
worker_processes 2;
events {}
http {
    log_format f '"$request" $status $connection $connection_requests $msec $request_time';
    access_log %%PREFIX%%/access.log f;
    access_log %%PREFIX%%/buffered.log f buffer=4k;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { return 200 "ok"; }
        location /static { root %%PREFIX%%/html; }
    }
}
`,
  });
  t.after(() => srv.stop());
  const port = srv.port(8080);
  const load = runLoad({ port, path: '/load?n=12345', concurrency: 8, durationMs: 2500, keepAlive: true });
  await sleep(800);
  for (const f of ['access.log', 'buffered.log', 'error.log']) fs.renameSync(srv.path(f), srv.path(`${f}.1`));
  srv.signal('USR1');
  const result = await load;
  assert.equal(result.failed, 0, result.errors.slice(0, 5).join(', '));
  assert.ok(result.ok > 100, `only ${result.ok} requests`);
  t.diagnostic(`${result.ok} requests`);

  // the last lines are written just after their responses: wait until the counts settle
  const count = (f: string) => lines(srv, f).length + lines(srv, `${f}.1`).length;
  const deadline = Date.now() + 5000;
  while (count('access.log') < result.ok && Date.now() < deadline) await sleep(50);
  // buffered lines still held are written by another USR1 (to the new file)
  srv.signal('USR1');
  while (count('buffered.log') < result.ok && Date.now() < deadline) await sleep(50);

  for (const f of ['access.log', 'buffered.log']) {
    const before = lines(srv, `${f}.1`);
    const after = lines(srv, f);
    assert.ok(before.length > 0 && after.length > 0, `${f}: ${before.length} lines before, ${after.length} after`);
    assert.equal(before.length + after.length, result.ok, `${f}: one line per request`);
    const bad = [...before, ...after].filter((l) => !LINE.test(l));
    assert.deepEqual(bad.slice(0, 3), [], `${f}: malformed lines`);
    // a (connection, request number) pair is one request: none twice
    const ids = new Set([...before, ...after].map((l) => l.split(' ').slice(4, 6).join(' ')));
    assert.equal(ids.size, result.ok, `${f}: duplicated lines`);
  }

  // the error log was reopened too: a new error goes to the new file
  await httpGet(port, '/static/missing');
  await srv.waitForLog('error.log', /open\(\) ".*\/html\/static\/missing" failed \(2: No such file or directory\)/);
});

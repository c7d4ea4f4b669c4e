// access_log buffer=, flush= and gzip: lines are held until the buffer would
// overflow, the flush time passes, USR1, a reload or the server stopping;
// with gzip every flushed buffer is one gzip member (what nginx writes), so
// the file reads with zcat.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { startGatehouse } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';
import { gunzipAll, gzipMembers, lines, readBytes, waitLines } from './helpers.ts';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function conf(logs: string): string {
  return `
events {}
http {
    log_format f '$uri:$status';
    ${logs}
    access_log %%PREFIX%%/marker.log f;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { return 200; }
    }
}
`;
}

/** Requests `paths` and waits until the unbuffered marker log has them all, so the buffered log had its chance. */
async function requests(srv: RunningServer, paths: string[]): Promise<void> {
  const before = lines(srv, 'marker.log').length;
  for (const p of paths) await httpGet(srv.port(8080), p);
  await waitLines(srv, 'marker.log', before + paths.length);
}

/** Polls until `check` holds (or the time is up); returns its last result. */
async function until<T>(get: () => T, check: (v: T) => boolean, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = get();
    if (check(v) || Date.now() > deadline) return v;
    await sleep(25);
  }
}

test('buffer=: held until full, then whole lines; USR1 writes the rest', async (t) => {
  // each line is "/NN:200\n" (8 bytes): a 40-byte buffer holds five
  const srv = await startGatehouse({ conf: conf('access_log %%PREFIX%%/buf.log f buffer=40;') });
  t.after(() => srv.stop());
  const paths = Array.from({ length: 8 }, (_, i) => `/${10 + i}`);
  await requests(srv, paths.slice(0, 5));
  assert.equal(readBytes(srv, 'buf.log').length, 0, 'five lines fit the buffer: nothing written yet');
  await requests(srv, paths.slice(5, 6));
  assert.deepEqual(lines(srv, 'buf.log'), paths.slice(0, 5).map((p) => `${p}:200`), 'the sixth line wrote the full buffer out');
  await requests(srv, paths.slice(6));
  srv.signal('USR1');
  const all = await until(() => lines(srv, 'buf.log'), (l) => l.length === 8);
  assert.deepEqual(all, paths.map((p) => `${p}:200`));
});

test('flush=: held lines are written after the flush time', async (t) => {
  const srv = await startGatehouse({ conf: conf('access_log %%PREFIX%%/buf.log f buffer=64k flush=200ms;') });
  t.after(() => srv.stop());
  await requests(srv, ['/a', '/b']);
  const got = await until(() => lines(srv, 'buf.log'), (l) => l.length === 2);
  assert.deepEqual(got, ['/a:200', '/b:200']);
});

test('gzip: each flushed buffer is one gzip member; zcat reads the file', async (t) => {
  const srv = await startGatehouse({ conf: conf('access_log %%PREFIX%%/gz.log f gzip=9 buffer=64k;') });
  t.after(() => srv.stop());
  await requests(srv, ['/1', '/2', '/3']);
  assert.equal(readBytes(srv, 'gz.log').length, 0);
  srv.signal('USR1');
  await until(() => readBytes(srv, 'gz.log').length, (n) => n > 0);
  await requests(srv, ['/4', '/5']);
  const size = readBytes(srv, 'gz.log').length;
  srv.signal('USR1');
  const data = await until(() => readBytes(srv, 'gz.log'), (b) => b.length > size);
  const members = gzipMembers(data);
  assert.equal(members.length, 2);
  assert.equal(gunzipAll(members[0]!), '/1:200\n/2:200\n/3:200\n');
  assert.equal(gunzipAll(members[1]!), '/4:200\n/5:200\n');
  assert.equal(gunzipAll(data), '/1:200\n/2:200\n/3:200\n/4:200\n/5:200\n');
});

test('gzip with flush=: written compressed after the flush time', async (t) => {
  const srv = await startGatehouse({ conf: conf('access_log %%PREFIX%%/gz.log f gzip buffer=1m flush=100ms;') });
  t.after(() => srv.stop());
  await requests(srv, ['/compressed']);
  const data = await until(() => readBytes(srv, 'gz.log'), (b) => b.length > 0);
  assert.deepEqual([data[0], data[1]], [0x1f, 0x8b]);
  assert.equal(gunzipAll(data), '/compressed:200\n');
});

test('a reload writes what the old configuration held', async (t) => {
  const srv = await startGatehouse({ conf: conf('access_log %%PREFIX%%/buf.log f buffer=64k;') });
  t.after(() => srv.stop());
  await requests(srv, ['/before1', '/before2']);
  assert.equal(readBytes(srv, 'buf.log').length, 0);
  await srv.reload();
  const got = await until(() => lines(srv, 'buf.log'), (l) => l.length === 2);
  assert.deepEqual(got, ['/before1:200', '/before2:200']);
});

test('stopping (QUIT and TERM) writes what is held', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-logs-'));
  try {
    for (const signal of ['QUIT', 'TERM']) {
      const file = path.join(dir, `${signal}.log`);
      const srv = await startGatehouse({ conf: conf(`access_log ${file} f buffer=64k;`) });
      await requests(srv, ['/x', '/y']);
      assert.equal(fs.readFileSync(file).length, 0);
      await srv.stop(signal);
      assert.equal(fs.readFileSync(file, 'latin1'), '/x:200\n/y:200\n', signal);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

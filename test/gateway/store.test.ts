/**
 * The embedded store's contract (src/gateway/store/store.ts) on a real
 * SQLite file: one revision counter, create/mod revisions, compare-and-swap,
 * prefix listing and deletion, ttl, and watches that see the writes of
 * another connection (as another worker thread would) in order, without gaps.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { SqliteStore } from '../../src/gateway/store/sqlite.ts';
import type { WatchEvent } from '../../src/gateway/store/store.ts';

function tempFile(): string {
  return path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-store-')), 'data', 'gateway.sqlite');
}

describe('SqliteStore', () => {
  it('revisions: create stays, mod moves, every write takes the next one', async () => {
    const s = new SqliteStore(tempFile());
    try {
      const a = await s.put('/gateway/routes/1', '{"a":1}');
      assert.deepEqual([a.ok, a.revision, a.prev, a.kv?.createRevision], [true, 1, undefined, 1]);
      await s.put('/gateway/routes/2', '{}');
      const b = await s.put('/gateway/routes/1', '{"a":2}');
      assert.deepEqual([b.revision, b.kv?.createRevision, b.kv?.modRevision, b.prev?.value], [3, 1, 3, '{"a":1}']);
      assert.deepEqual(await s.get('/gateway/routes/1'), { key: '/gateway/routes/1', value: '{"a":2}', createRevision: 1, modRevision: 3 });
    } finally { s.close(); }
  });

  it('compare-and-swap on the mod revision; 0 means "must not exist"', async () => {
    const s = new SqliteStore(tempFile());
    try {
      assert.equal((await s.put('/k', 'v1', { expectRevision: 0 })).ok, true);
      assert.equal((await s.put('/k', 'v2', { expectRevision: 0 })).ok, false);
      assert.equal((await s.put('/k', 'v2', { expectRevision: 7 })).ok, false);
      assert.equal((await s.put('/k', 'v2', { expectRevision: 1 })).ok, true);
      assert.equal((await s.get('/k'))?.value, 'v2');
    } finally { s.close(); }
  });

  it('lists in byte order under a prefix and deletes a prefix', async () => {
    const s = new SqliteStore(tempFile());
    try {
      for (const id of ['2', '10', '1']) await s.put(`/gateway/routes/${id}`, id);
      await s.put('/gateway/routesx/1', 'other');
      const { kvs, revision } = await s.list('/gateway/routes/');
      assert.deepEqual(kvs.map((k) => k.key), ['/gateway/routes/1', '/gateway/routes/10', '/gateway/routes/2']);
      assert.equal(revision, 4);
      assert.deepEqual(await s.delete('/gateway/routes/', { prefix: true }), { deleted: 3, revision: 7 });
      assert.equal((await s.list('/gateway/')).kvs.length, 1);
    } finally { s.close(); }
  });

  it('a watch on another connection sees every change in order, from the revision asked', async () => {
    const file = tempFile();
    const writer = new SqliteStore(file);
    const reader = new SqliteStore(file);
    try {
      await writer.put('/a', '1');
      const seen: WatchEvent[] = [];
      const done = new Promise<void>((resolve) => {
        reader.watch(1, {
          events(events) { seen.push(...events); if (seen.length === 3) resolve(); },
          compacted() { throw new Error('not compacted'); },
        });
      });
      await writer.put('/b', '2');
      await writer.delete('/a');
      await writer.put('/b', '3');
      await done;
      assert.deepEqual(seen.map((e) => [e.type, e.kv.key, e.kv.modRevision]), [['put', '/b', 2], ['delete', '/a', 3], ['put', '/b', 4]]);
    } finally { writer.close(); reader.close(); }
  });

  it('a key with a ttl is gone once it runs out, as a delete watchers see', async () => {
    const s = new SqliteStore(tempFile());
    try {
      await s.put('/t', 'x', { ttl: 0.05 });
      const deleted = new Promise<WatchEvent>((resolve) => {
        s.watch(1, { events(events) { const d = events.find((e) => e.type === 'delete'); if (d) resolve(d); }, compacted() {} });
      });
      assert.equal((await deleted).kv.key, '/t');
      assert.equal(await s.get('/t'), undefined);
    } finally { s.close(); }
  });
});

describe('SqliteStore opened by several threads at once', () => {
  it('every thread opens a new store file (none fails with "database is locked")', async () => {
    const { Worker } = await import('node:worker_threads');
    const opener = new URL('./fixtures/open-store.ts', import.meta.url);
    const failures: string[] = [];
    // a race: a new file switched to WAL by one thread while the others open it
    for (let round = 0; round < 10; round++) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-store-open-'));
      const file = path.join(dir, 'gateway.sqlite');
      const workers = Array.from({ length: 4 }, () => new Worker(opener, { workerData: file }));
      const said = await Promise.all(workers.map((w) => new Promise<string>((resolve) => w.once('message', resolve))));
      await Promise.all(workers.map((w) => w.terminate()));
      failures.push(...said.filter((s) => s !== 'ok'));
      fs.rmSync(dir, { recursive: true, force: true });
    }
    assert.deepEqual(failures, []);
  });
});

/**
 * The embedded store: one SQLite file (node:sqlite) under the prefix,
 * shared by every worker thread, each with its own connection.
 *
 * Durability: WAL journal with `synchronous=FULL`, so a write is in the
 * fsynced log before its transaction returns and therefore before the Admin
 * API answers 2xx; it survives `kill -9` of any process (and a power cut).
 * Writers take the write lock first (`BEGIN IMMEDIATE`), so the revision
 * check of a compare-and-swap and the write are one step.
 *
 * Changes reach the other threads over a BroadcastChannel named after the
 * file (a "something changed" ping; each watcher reads the change log from
 * the last revision it saw, so a lost ping loses nothing), with a slow poll
 * as a safety net for writers in other processes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BroadcastChannel } from 'node:worker_threads';
import type { StatementSync } from 'node:sqlite';
import { StoreError } from './store.ts';
import type { DeleteResult, KeyValue, PutOptions, PutResult, Store, WatchEvent, Watcher, WatchHandlers } from './store.ts';

/** Change-log entries kept for watchers that fall behind; older ones are compacted. */
const LOG_KEEP = 10_000;
/** Poll interval for writes from outside this process, and for expiring keys (ttl). */
const POLL_MS = 1000;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS kv (
  key TEXT PRIMARY KEY, value TEXT NOT NULL,
  create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL, expires_at INTEGER);
CREATE TABLE IF NOT EXISTS log (
  rev INTEGER PRIMARY KEY, key TEXT NOT NULL, type TEXT NOT NULL, value TEXT NOT NULL, create_rev INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('revision', 0), ('compacted', 0);
`;

interface Row { key: string; value: string; create_rev: number; mod_rev: number }
interface LogRow { rev: number; key: string; type: string; value: string; create_rev: number }

interface WatchState { from: number; handlers: WatchHandlers; cancelled: boolean }

function toKv(row: Row): KeyValue {
  return { key: row.key, value: row.value, createRevision: row.create_rev, modRevision: row.mod_rev };
}

/** The smallest string greater than every string starting with `prefix`. */
function prefixEnd(prefix: string): string {
  return prefix + '\uffff';
}

/**
 * WAL mode and the schema, for every worker opening the store at once.
 * IMMEDIATE takes the write lock before reading the schema, so workers creating
 * it wait for each other (busy_timeout). Switching a new file to WAL can still
 * answer "database is locked" at once, without the busy handler (SQLite does so
 * where waiting could deadlock): that is tried again, for up to 10 s.
 */
function openSchema(db: DatabaseSync): void {
  const deadline = Date.now() + 10_000;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      db.exec('PRAGMA busy_timeout=10000; PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;');
      db.exec(`BEGIN IMMEDIATE; ${SCHEMA}; COMMIT;`);
      return;
    } catch (e) {
      if (!/database is locked|SQLITE_BUSY/.test((e as Error).message) || Date.now() > deadline) throw e;
      try { db.exec('ROLLBACK'); } catch { /* no transaction was open */ }
      Atomics.wait(pause, 0, 0, 20);
    }
  }
}

export class SqliteStore implements Store {
  readonly kind = 'sqlite';
  readonly file: string;
  private readonly db: DatabaseSync;
  private readonly channel: BroadcastChannel;
  private readonly watchers = new Set<WatchState>();
  private readonly timer: NodeJS.Timeout;
  private readonly q: Record<string, StatementSync>;
  private closed = false;

  constructor(file: string) {
    this.file = file;
    fs.mkdirSync(path.dirname(file), { recursive: true });
    try {
      // the busy timeout first: every worker opens the store at once, and switching a new file
      // to WAL or creating the schema takes a lock the others must wait for, not fail on
      this.db = new DatabaseSync(file, { timeout: 10_000 });
      openSchema(this.db);
    } catch (e) {
      throw new StoreError(`cannot open the store "${file}": ${(e as Error).message}`);
    }
    const live = '(expires_at IS NULL OR expires_at > ?)';
    this.q = {
      get: this.db.prepare(`SELECT key, value, create_rev, mod_rev FROM kv WHERE key = ? AND ${live}`),
      list: this.db.prepare(`SELECT key, value, create_rev, mod_rev FROM kv WHERE key >= ? AND key < ? AND ${live} ORDER BY key`),
      expired: this.db.prepare('SELECT key, value, create_rev, mod_rev FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?'),
      upsert: this.db.prepare('INSERT OR REPLACE INTO kv (key, value, create_rev, mod_rev, expires_at) VALUES (?, ?, ?, ?, ?)'),
      remove: this.db.prepare('DELETE FROM kv WHERE key = ?'),
      log: this.db.prepare('INSERT INTO log (rev, key, type, value, create_rev) VALUES (?, ?, ?, ?, ?)'),
      since: this.db.prepare('SELECT rev, key, type, value, create_rev FROM log WHERE rev > ? ORDER BY rev LIMIT 1000'),
      meta: this.db.prepare('SELECT value FROM meta WHERE name = ?'),
      setMeta: this.db.prepare('UPDATE meta SET value = ? WHERE name = ?'),
      compact: this.db.prepare('DELETE FROM log WHERE rev <= ?'),
    };
    this.channel = new BroadcastChannel(`gatehouse-store:${path.resolve(file)}`);
    this.channel.onmessage = () => this.pump();
    this.channel.unref();
    this.timer = setInterval(() => { this.expire(); this.pump(); }, POLL_MS);
    this.timer.unref();
  }

  private meta(name: string): number {
    return Number((this.q.meta.get(name) as { value: number }).value);
  }

  /** Runs `fn` holding the write lock; commits, then tells the other threads. */
  private write<T>(fn: () => T): T {
    if (this.closed) throw new StoreError('the store is closed');
    let result: T;
    try {
      this.db.exec('BEGIN IMMEDIATE');
    } catch (e) {
      throw new StoreError(`store busy: ${(e as Error).message}`);
    }
    try {
      result = fn();
      this.db.exec('COMMIT');
    } catch (e) {
      try { this.db.exec('ROLLBACK'); } catch { /* the transaction is already gone */ }
      throw e instanceof StoreError ? e : new StoreError((e as Error).message);
    }
    this.channel.postMessage(0);
    queueMicrotask(() => this.pump());
    return result;
  }

  /** Takes the next revision and records one change under it (inside write()). */
  private record(type: 'put' | 'delete', key: string, value: string, createRev: number): number {
    const rev = this.meta('revision') + 1;
    this.q.setMeta.run(rev, 'revision');
    this.q.log.run(rev, key, type, value, createRev);
    if (rev % 1000 === 0 && rev > LOG_KEEP) {
      this.q.compact.run(rev - LOG_KEEP);
      this.q.setMeta.run(rev - LOG_KEEP, 'compacted');
    }
    return rev;
  }

  async revision(): Promise<number> {
    return this.meta('revision');
  }

  async get(key: string): Promise<KeyValue | undefined> {
    const row = this.q.get.get(key, Date.now()) as Row | undefined;
    return row && toKv(row);
  }

  async list(prefix: string): Promise<{ kvs: KeyValue[]; revision: number }> {
    // one read transaction: the rows and the revision agree
    this.db.exec('BEGIN');
    try {
      const rows = this.q.list.all(prefix, prefixEnd(prefix), Date.now()) as unknown as Row[];
      return { kvs: rows.map(toKv), revision: this.meta('revision') };
    } finally {
      this.db.exec('COMMIT');
    }
  }

  async put(key: string, value: string, options: PutOptions = {}): Promise<PutResult> {
    return this.write(() => {
      const prevRow = this.q.get.get(key, Date.now()) as Row | undefined;
      const prev = prevRow && toKv(prevRow);
      if (options.expectRevision !== undefined && (prev?.modRevision ?? 0) !== options.expectRevision) {
        return { ok: false, revision: this.meta('revision'), prev, kv: undefined };
      }
      const rev = this.meta('revision') + 1;
      const createRev = prev ? prev.createRevision : rev;
      this.record('put', key, value, createRev);
      const expires = options.ttl !== undefined ? Date.now() + options.ttl * 1000 : null;
      this.q.upsert.run(key, value, createRev, rev, expires);
      return { ok: true, revision: rev, prev, kv: { key, value, createRevision: createRev, modRevision: rev } };
    });
  }

  async delete(key: string, options: { prefix?: boolean; expectRevision?: number } = {}): Promise<DeleteResult> {
    return this.write(() => {
      const now = Date.now();
      const rows = options.prefix
        ? this.q.list.all(key, prefixEnd(key), now) as unknown as Row[]
        : [this.q.get.get(key, now) as Row | undefined].filter((r): r is Row => r !== undefined);
      if (options.expectRevision !== undefined && (rows[0]?.mod_rev ?? 0) !== options.expectRevision) {
        return { deleted: 0, revision: this.meta('revision') };
      }
      for (const row of rows) {
        this.record('delete', row.key, '', row.create_rev);
        this.q.remove.run(row.key);
      }
      return { deleted: rows.length, revision: this.meta('revision') };
    });
  }

  /** Deletes keys whose ttl ran out, as changes watchers see. */
  private expire(): void {
    if (this.closed) return;
    const rows = this.q.expired.all(Date.now()) as unknown as Row[];
    if (rows.length === 0) return;
    try {
      this.write(() => {
        for (const row of this.q.expired.all(Date.now()) as unknown as Row[]) {
          this.record('delete', row.key, '', row.create_rev);
          this.q.remove.run(row.key);
        }
      });
    } catch { /* another thread holds the lock: the next poll tries again */ }
  }

  watch(fromRevision: number, handlers: WatchHandlers): Watcher {
    const w: WatchState = { from: fromRevision, handlers, cancelled: false };
    this.watchers.add(w);
    queueMicrotask(() => this.pump());
    return { cancel: () => { w.cancelled = true; this.watchers.delete(w); } };
  }

  /** Hands every watcher the changes after the last revision it saw. */
  private pump(): void {
    if (this.closed || this.watchers.size === 0) return;
    const compacted = this.meta('compacted');
    for (const w of [...this.watchers]) {
      if (w.from < compacted) {
        this.watchers.delete(w);
        w.handlers.compacted(compacted);
        continue;
      }
      for (;;) {
        const rows = this.q.since.all(w.from) as unknown as LogRow[];
        if (rows.length === 0 || w.cancelled) break;
        const events: WatchEvent[] = rows.map((r) => ({
          type: r.type as 'put' | 'delete',
          kv: { key: r.key, value: r.value, createRevision: r.create_rev, modRevision: r.rev },
        }));
        w.from = rows[rows.length - 1].rev;
        w.handlers.events(events, w.from);
      }
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.channel.close();
    this.watchers.clear();
    this.db.close();
  }
}

/**
 * A worker's copy of the configuration: every key under the prefix with
 * its value and revisions, and the store revision it is consistent with
 * (what the status endpoint shows, what the data plane reads).
 *
 * It lists once, then watches from the listing's revision. When the
 * watch's history is gone (compacted, or etcd replaced), it lists again
 * and applies only what differs from its copy (by mod_revision and value),
 * instead of reloading everything. When the store cannot be reached it
 * keeps what it has and tries again; with a snapshot file (etcd), it
 * starts from the last configuration it saved, so a gateway restarted
 * while etcd is down serves that configuration.
 */
import fs from 'node:fs';
import { threadId } from 'node:worker_threads';
import type { KeyValue, Store, WatchEvent, Watcher } from './store.ts';

/** The snapshot is written this long after the last change (a burst of changes writes once). */
const SNAPSHOT_DELAY_MS = 100;
const RETRY_FIRST_MS = 200;
const RETRY_MAX_MS = 3000;
/** How long a status question waits for the store (the question itself gives up after 500 ms). */
const CONFIRM_MS = 200;

interface Snapshot { prefix: string; revision: number; kvs: KeyValue[] }

export interface FollowerReport {
  revision: number;
  keys: number;
  /** Listings applied (the first one included). */
  relists: number;
  /** Keys the last listing changed in the copy. */
  last_relist_changes: number;
  /** Why the store cannot be followed now. */
  error?: string;
}

export class ConfigFollower {
  readonly kvs = new Map<string, KeyValue>();
  revision = 0;
  private relists = 0;
  private lastRelistChanges = 0;
  private error: string | undefined;
  private watcher: Watcher | undefined;
  private retry: NodeJS.Timeout | undefined;
  private snapshotTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private closed = false;
  private readonly store: Store;
  private readonly prefix: string;
  private readonly snapshotFile: string | undefined;
  private readonly listeners: Array<() => void> = [];

  /** `prefix` ends with `/`; `snapshotFile`: where the last configuration is kept (undefined: nowhere). */
  constructor(store: Store, prefix: string, snapshotFile: string | undefined) {
    this.store = store;
    this.prefix = prefix;
    this.snapshotFile = snapshotFile;
    if (snapshotFile) this.loadSnapshot(snapshotFile);
    void this.sync();
  }

  /** Calls `fn` after each change applied to the copy (the gateway's ACME orders follow the SSL objects). */
  onChange(fn: () => void): void {
    this.listeners.push(fn);
  }

  private changed(): void {
    for (const fn of this.listeners) fn();
  }

  report(): FollowerReport {
    const r: FollowerReport = { revision: this.revision, keys: this.kvs.size, relists: this.relists, last_relist_changes: this.lastRelistChanges };
    if (this.error !== undefined) r.error = this.error;
    return r;
  }

  /**
   * The report, after checking whether the store's revision moved on
   * through writes outside the prefix only (other clusters sharing the
   * etcd): when every key and its mod_revision are what this copy has, the
   * copy is the configuration at the store's revision, and says so, so a
   * worker shown behind the store is one that really is.
   */
  async confirmedReport(): Promise<FollowerReport> {
    if (this.watcher === undefined || this.error !== undefined) return this.report();
    // a slow store must not make the worker miss the status endpoint's question
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.confirm(), new Promise((resolve) => { timer = setTimeout(resolve, CONFIRM_MS); })]);
    clearTimeout(timer);
    return this.report();
  }

  private async confirm(): Promise<void> {
    try {
      if (await this.store.revision() > this.revision) {
        const { kvs, revision } = await this.store.list(this.prefix, { keysOnly: true });
        if (revision > this.revision && this.holds(kvs)) this.revision = revision;
      }
    } catch { /* the watch's own state is what there is to report */ }
  }

  /** Whether this copy has exactly these keys at these revisions. */
  private holds(kvs: KeyValue[]): boolean {
    if (kvs.length !== this.kvs.size) return false;
    return kvs.every((kv) => this.kvs.get(kv.key)?.modRevision === kv.modRevision);
  }

  private loadSnapshot(file: string): void {
    let snap: Snapshot;
    try {
      snap = JSON.parse(fs.readFileSync(file, 'utf8')) as Snapshot;
    } catch {
      return; // none yet, or unreadable: the listing will bring everything
    }
    if (snap.prefix !== this.prefix) return; // another prefix's configuration
    for (const kv of snap.kvs) this.kvs.set(kv.key, kv);
    this.revision = snap.revision;
  }

  /** Lists, applies the differences, watches from there; on failure, tries again later. */
  private async sync(): Promise<void> {
    if (this.closed) return;
    let listing: { kvs: KeyValue[]; revision: number };
    try {
      listing = await this.store.list(this.prefix);
    } catch (e) {
      this.error = (e as Error).message;
      this.retry = setTimeout(() => void this.sync(), Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** this.failures++));
      return;
    }
    if (this.closed) return;
    this.failures = 0;
    this.error = undefined;
    this.applyListing(listing.kvs, listing.revision);
    this.watcher = this.store.watch(listing.revision, {
      events: (events, revision) => this.applyEvents(events, revision),
      compacted: () => { this.watcher = undefined; void this.sync(); },
      state: (error) => { this.error = error; },
    });
  }

  private applyListing(kvs: KeyValue[], revision: number): void {
    let changes = 0;
    const seen = new Set<string>();
    for (const kv of kvs) {
      seen.add(kv.key);
      const had = this.kvs.get(kv.key);
      if (had && had.modRevision === kv.modRevision && had.value === kv.value) continue;
      this.kvs.set(kv.key, kv);
      changes++;
    }
    for (const key of [...this.kvs.keys()]) {
      if (!seen.has(key)) { this.kvs.delete(key); changes++; }
    }
    this.relists++;
    this.lastRelistChanges = changes;
    this.revision = revision;
    this.saveSnapshotSoon();
    if (changes) this.changed();
  }

  private applyEvents(events: WatchEvent[], revision: number): void {
    for (const ev of events) {
      // a confirmed revision (confirmedReport) already holds the effect of every change up to it
      if (ev.kv.modRevision <= this.revision) continue;
      if (ev.type === 'put') this.kvs.set(ev.kv.key, ev.kv);
      else this.kvs.delete(ev.kv.key);
    }
    this.revision = Math.max(this.revision, revision);
    this.saveSnapshotSoon();
    this.changed();
  }

  private saveSnapshotSoon(): void {
    if (!this.snapshotFile || this.snapshotTimer) return;
    this.snapshotTimer = setTimeout(() => {
      this.snapshotTimer = undefined;
      this.saveSnapshot();
    }, SNAPSHOT_DELAY_MS);
    this.snapshotTimer.unref();
  }

  /** Written whole then renamed, so a reader (or a crash) never sees half a file; every worker writes the same. */
  private saveSnapshot(): void {
    const file = this.snapshotFile;
    if (!file) return;
    const snap: Snapshot = { prefix: this.prefix, revision: this.revision, kvs: [...this.kvs.values()] };
    const tmp = `${file}.${process.pid}.${threadId}.tmp`;
    try {
      fs.writeFileSync(tmp, JSON.stringify(snap), { mode: 0o600 });
      fs.renameSync(tmp, file);
    } catch {
      fs.rmSync(tmp, { force: true });
    }
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retry);
    if (this.snapshotTimer) {
      clearTimeout(this.snapshotTimer);
      this.snapshotTimer = undefined;
      this.saveSnapshot();
    }
    this.watcher?.cancel();
  }
}

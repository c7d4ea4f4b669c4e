/**
 * The gateway's storage contract, shaped after etcd v3 so that the embedded
 * SQLite backend (sqlite.ts) and etcd can stand behind it alike: a flat key
 * space, one revision counter for the whole store, every key carrying the
 * revision that created it and the one that last changed it (the Admin API's
 * createdIndex/modifiedIndex), compare-and-swap on a key's revision, and a
 * watch that replays every change after a given revision.
 */

export interface KeyValue {
  key: string;
  /** The stored text (JSON for every gateway object). */
  value: string;
  createRevision: number;
  modRevision: number;
}

export interface PutOptions {
  /**
   * Compare-and-swap: write only if the key's modRevision is this (0: only
   * if the key does not exist).
   */
  expectRevision?: number;
  /** Seconds after which the key is deleted (etcd's lease). */
  ttl?: number;
}

export interface PutResult {
  /** False when `expectRevision` did not hold; nothing was written. */
  ok: boolean;
  /** The store's revision after the write (or now, when not written). */
  revision: number;
  /** The key as it was before the write. */
  prev: KeyValue | undefined;
  /** The key as written. */
  kv: KeyValue | undefined;
}

export interface DeleteResult {
  deleted: number;
  revision: number;
}

export interface WatchEvent {
  type: 'put' | 'delete';
  /** For a delete: the key with the revision of the deletion as modRevision and an empty value. */
  kv: KeyValue;
}

export interface Watcher {
  cancel(): void;
}

export interface WatchHandlers {
  /** Changes in revision order, each batch complete up to its last revision. */
  events(events: WatchEvent[], revision: number): void;
  /**
   * The changes after the asked revision are gone (compacted): re-list with
   * `list` and watch again from the listing's revision.
   */
  compacted(compactRevision: number): void;
  /** The watch lost its store (the error) or has it again (undefined); it resumes by itself. */
  state?(error: string | undefined): void;
}

/** A storage failure (the Admin API answers 503 with its message). */
export class StoreError extends Error {}

export interface Store {
  readonly kind: 'sqlite' | 'etcd' | 'yaml';
  get(key: string): Promise<KeyValue | undefined>;
  /**
   * Every key starting with `prefix`, in byte order, with the revision the
   * listing is consistent with. `keysOnly`: the values may be left empty.
   */
  list(prefix: string, options?: { keysOnly?: boolean }): Promise<{ kvs: KeyValue[]; revision: number }>;
  put(key: string, value: string, options?: PutOptions): Promise<PutResult>;
  /** Deletes `key`, or every key starting with it when `prefix` is set. */
  delete(key: string, options?: { prefix?: boolean; expectRevision?: number }): Promise<DeleteResult>;
  /** The store's current revision. */
  revision(): Promise<number>;
  /** Calls `handlers.events` with every change after `fromRevision`, now and as they happen. */
  watch(fromRevision: number, handlers: WatchHandlers): Watcher;
  close(): void;
}

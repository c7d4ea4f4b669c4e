/**
 * Keyed shared-memory zones: nginx's `ngx_shared_memory_add` (a zone name
 * is declared once per configuration, for one use, with one size) and the
 * store nginx builds in such a zone with its slab allocator, a red-black
 * tree and an LRU queue (limit_req, limit_conn) — here a hash table of
 * fixed-size slots in a SharedArrayBuffer, so every worker thread sees the
 * same entries synchronously.
 *
 * The buffer comes from src/core/shared.ts: the master creates it while it
 * loads the configuration and hands it to the workers, and a reload with
 * the same use, name and size finds the same buffer (its entries survive,
 * as nginx keeps a zone whose name and size are unchanged).
 *
 * Layout (all-zero bytes are an empty table, so nothing initializes it):
 *   header   HEADER_BYTES: lock, slots ever used, free list, LRU head/tail, live count
 *   buckets  one int32 per bucket: first slot of its chain (0: none)
 *   slots    SLOT_BYTES each, numbered from 1:
 *              i32 0 chain next | 1 LRU newer | 2 LRU older | 3 hash | 4 key length (+DIGEST)
 *              f64 3..5 the owner's values | bytes 48..127 the key
 * A key longer than the slot holds is stored as its SHA-1 digest.
 */
import crypto from 'node:crypto';
import type { ConfContext } from '../conf/context.ts';
import { ConfError } from '../conf/errors.ts';
import { parseSize } from '../conf/values.ts';
import { Cycle } from './cycle.ts';
import { sharedZone } from './shared.ts';

// ---- declarations (ngx_shared_memory_add) ----

export interface ZoneDecl<T> {
  readonly name: string;
  /** What the zone is for (nginx's tag): `limit_req`, `limit_conn`. */
  readonly tag: string;
  /** 0 until a directive gives the size (a zone may be used before it is defined). */
  size: number;
  /** What the defining directive built (key, rate, table); undefined until then. */
  data: T | undefined;
}

const declared = new WeakMap<Cycle, Map<string, ZoneDecl<unknown>>>();

/**
 * Declares or finds zone `name` in the configuration being read, with
 * nginx's errors for a name used for another purpose or with another size.
 * `size` 0 refers to the zone without defining it.
 */
export function declareZone<T>(cf: ConfContext, name: string, size: number, tag: string): ZoneDecl<T> {
  const cycle = Cycle.of(cf);
  let zones = declared.get(cycle);
  if (!zones) declared.set(cycle, (zones = new Map()));
  const have = zones.get(name);
  if (!have) {
    const decl: ZoneDecl<T> = { name, tag, size, data: undefined };
    zones.set(name, decl as ZoneDecl<unknown>);
    return decl;
  }
  if (have.tag !== tag) throw cf.error(`the shared memory zone "${name}" is already declared for a different use`);
  if (have.size === 0) have.size = size;
  if (size && size !== have.size) {
    throw cf.error(`the size ${size} of shared memory zone "${name}" conflicts with already declared size ${have.size}`);
  }
  return have as ZoneDecl<T>;
}

/** `zone=name:size` of a `*_zone` directive: [name, size], with nginx's errors. */
export function zoneParam(cf: ConfContext, arg: string): [string, number] {
  const colon = arg.indexOf(':', 5);
  if (colon < 0) throw cf.error(`invalid zone size "${arg}"`);
  const size = parseSize(arg.slice(colon + 1));
  if (Number.isNaN(size)) throw cf.error(`invalid zone size "${arg}"`);
  // nginx: at least 8 pages
  if (size < 8 * 4096) throw cf.error(`zone "${arg}" is too small`);
  return [arg.slice(5, colon), size];
}

/**
 * The zones for `tag` of a complete configuration, with nginx's check that
 * every zone used was defined somewhere.
 */
export function definedZones<T>(cycle: Cycle, tag: string): ZoneDecl<T>[] {
  const out: ZoneDecl<T>[] = [];
  for (const z of declared.get(cycle)?.values() ?? []) {
    if (z.tag !== tag) continue;
    if (z.size === 0) throw new ConfError(`zero size shared memory zone "${z.name}"`);
    out.push(z as ZoneDecl<T>);
  }
  return out;
}

/** The key each zone was first bound to in this thread (nginx refuses a reload that changes it). */
const boundKeys = new Map<string, string>();

/**
 * nginx's `NAME "zone" uses the "$new" key while previously it used the
 * "$old" key`: a zone kept across a reload must keep its key. Returns the
 * message, or undefined (and remembers the key).
 */
export function bindZoneKey(what: string, decl: ZoneDecl<unknown>, keySource: string): string | undefined {
  const id = `${decl.tag}:${decl.name}/${decl.size}`;
  const before = boundKeys.get(id);
  if (before !== undefined && before !== keySource) {
    return `${what} "${decl.name}" uses the "${keySource}" key while previously it used the "${before}" key`;
  }
  boundKeys.set(id, keySource);
  return undefined;
}

// ---- the table ----

const HEADER_BYTES = 64;
const H_LOCK = 0;
const H_USED = 1;
const H_FREE = 2;
const H_NEWEST = 3;
const H_OLDEST = 4;
const H_LIVE = 5;

export const SLOT_BYTES = 128;
const S_NEXT = 0;
const S_NEWER = 1;
const S_OLDER = 2;
const S_HASH = 3;
const S_KEYLEN = 4;
/** First f64 of a slot's values (bytes 24..47: three numbers). */
const VALUES_F64 = 3;
const KEY_OFFSET = 48;
const KEY_ROOM = SLOT_BYTES - KEY_OFFSET;
/** Set in the key length when the slot holds the key's digest. */
const DIGEST = 0x10000;

/** A futex mutex in `a[at]` (0 free, 1 held, 2 held with waiters): no syscall unless contended. */
export function futexLock(a: Int32Array, at: number): void {
  let c = Atomics.compareExchange(a, at, 0, 1);
  if (c === 0) return;
  do {
    if (c === 2 || Atomics.compareExchange(a, at, 1, 2) !== 0) Atomics.wait(a, at, 2, 10);
  } while ((c = Atomics.compareExchange(a, at, 0, 2)) !== 0);
}

export function futexUnlock(a: Int32Array, at: number): void {
  if (Atomics.sub(a, at, 1) !== 1) {
    Atomics.store(a, at, 0);
    Atomics.notify(a, at, 1);
  }
}

/**
 * A hash table in a shared zone. Every method except lock/unlock expects
 * the caller to hold the lock (nginx's ngx_shmtx_lock around its tree work).
 */
export class SharedTable {
  readonly capacity: number;
  /** The slots' values: `f64[values(slot) + i]`, i < 3. */
  readonly f64: Float64Array;
  private readonly i32: Int32Array;
  private readonly u8: Uint8Array;
  private readonly bucketMask: number;
  private readonly bucketsAt: number;
  private readonly slotsAt: number;
  /** Key bytes of the current lookup (the key, or its digest). */
  private readonly keyBuf = new Uint8Array(KEY_ROOM);
  private keyLen = 0;

  constructor(buf: SharedArrayBuffer) {
    this.i32 = new Int32Array(buf);
    this.u8 = new Uint8Array(buf);
    this.f64 = new Float64Array(buf);
    const room = buf.byteLength - HEADER_BYTES;
    const slots = Math.floor(room / (SLOT_BYTES + 4));
    let buckets = 1;
    while (buckets * 2 <= slots) buckets *= 2;
    this.bucketMask = buckets - 1;
    this.bucketsAt = HEADER_BYTES / 4;
    this.slotsAt = HEADER_BYTES + buckets * 4;
    this.capacity = Math.floor((buf.byteLength - this.slotsAt) / SLOT_BYTES);
  }

  lock(): void {
    futexLock(this.i32, H_LOCK);
  }

  unlock(): void {
    futexUnlock(this.i32, H_LOCK);
  }

  /** Index into `f64` of the slot's first value. */
  values(slot: number): number {
    return (this.slotsAt + (slot - 1) * SLOT_BYTES) / 8 + VALUES_F64;
  }

  private base(slot: number): number {
    return (this.slotsAt + (slot - 1) * SLOT_BYTES) >> 2;
  }

  /**
   * Prepares `key` (a byte string) for find/insert and returns its hash.
   * Call it outside the lock.
   */
  prepare(key: string): number {
    const kb = this.keyBuf;
    let len = key.length;
    if (len <= KEY_ROOM) {
      for (let i = 0; i < len; i++) kb[i] = key.charCodeAt(i);
    } else {
      const d = crypto.hash('sha1', Buffer.from(key, 'latin1'), 'buffer');
      kb.set(d);
      len = d.length | DIGEST;
    }
    this.keyLen = len;
    // FNV-1a over the stored bytes
    let h = 0x811c9dc5;
    const n = len & 0xffff;
    for (let i = 0; i < n; i++) h = Math.imul(h ^ kb[i], 0x01000193);
    return h >>> 0;
  }

  /** The slot holding the prepared key, or 0. */
  find(hash: number): number {
    const i32 = this.i32;
    let slot = i32[this.bucketsAt + (hash & this.bucketMask)];
    while (slot !== 0) {
      const b = this.base(slot);
      if (i32[b + S_HASH] === (hash | 0) && i32[b + S_KEYLEN] === this.keyLen && this.sameKey(slot)) return slot;
      slot = i32[b + S_NEXT];
    }
    return 0;
  }

  private sameKey(slot: number): boolean {
    const at = this.slotsAt + (slot - 1) * SLOT_BYTES + KEY_OFFSET;
    const u8 = this.u8;
    const kb = this.keyBuf;
    const n = this.keyLen & 0xffff;
    for (let i = 0; i < n; i++) if (u8[at + i] !== kb[i]) return false;
    return true;
  }

  /** The stored key bytes of `slot` as a byte string (a long key's digest); the cache needs it to find an evicted entry's file. */
  keyAt(slot: number): string {
    const at = this.slotsAt + (slot - 1) * SLOT_BYTES + KEY_OFFSET;
    const n = this.i32[this.base(slot) + S_KEYLEN] & 0xffff;
    return Buffer.from(this.u8.subarray(at, at + n)).toString('latin1');
  }

  /** Adds the prepared key as the newest entry, values zero; 0 when the table is full. */
  insert(hash: number): number {
    const i32 = this.i32;
    let slot = i32[H_FREE];
    if (slot !== 0) i32[H_FREE] = i32[this.base(slot) + S_NEXT];
    else if (i32[H_USED] < this.capacity) slot = ++i32[H_USED];
    else return 0;
    const b = this.base(slot);
    const bucket = this.bucketsAt + (hash & this.bucketMask);
    i32[b + S_NEXT] = i32[bucket];
    i32[bucket] = slot;
    i32[b + S_HASH] = hash | 0;
    i32[b + S_KEYLEN] = this.keyLen;
    this.u8.set(this.keyBuf.subarray(0, this.keyLen & 0xffff), this.slotsAt + (slot - 1) * SLOT_BYTES + KEY_OFFSET);
    const v = this.values(slot);
    this.f64[v] = 0;
    this.f64[v + 1] = 0;
    this.f64[v + 2] = 0;
    this.linkNewest(slot);
    i32[H_LIVE]++;
    return slot;
  }

  /** Removes `slot` from its chain and the LRU list and frees it. */
  remove(slot: number): void {
    const i32 = this.i32;
    const b = this.base(slot);
    let at = this.bucketsAt + (i32[b + S_HASH] & this.bucketMask);
    while (i32[at] !== slot) at = this.base(i32[at]) + S_NEXT;
    i32[at] = i32[b + S_NEXT];
    this.unlink(slot);
    i32[b + S_NEXT] = i32[H_FREE];
    i32[H_FREE] = slot;
    i32[H_LIVE]--;
  }

  /** Marks `slot` the most recently used (nginx moves a node to the head of its queue on lookup). */
  touch(slot: number): void {
    if (this.i32[H_NEWEST] === slot) return;
    this.unlink(slot);
    this.linkNewest(slot);
  }

  /** The least recently used slot, or 0 when empty. */
  oldest(): number {
    return this.i32[H_OLDEST];
  }

  /** The slot used just before `slot` (0: none), to walk entries from newest() to the oldest. */
  older(slot: number): number {
    return this.i32[this.base(slot) + S_OLDER];
  }

  /** The slot used just after `slot` (0: none). */
  newer(slot: number): number {
    return this.i32[this.base(slot) + S_NEWER];
  }

  /** The most recently used slot, or 0 when empty. */
  newest(): number {
    return this.i32[H_NEWEST];
  }

  /** Entries in use. */
  get size(): number {
    return this.i32[H_LIVE];
  }

  private linkNewest(slot: number): void {
    const i32 = this.i32;
    const b = this.base(slot);
    const head = i32[H_NEWEST];
    i32[b + S_NEWER] = 0;
    i32[b + S_OLDER] = head;
    if (head !== 0) i32[this.base(head) + S_NEWER] = slot;
    else i32[H_OLDEST] = slot;
    i32[H_NEWEST] = slot;
  }

  private unlink(slot: number): void {
    const i32 = this.i32;
    const b = this.base(slot);
    const newer = i32[b + S_NEWER];
    const older = i32[b + S_OLDER];
    if (newer !== 0) i32[this.base(newer) + S_OLDER] = older;
    else i32[H_NEWEST] = older;
    if (older !== 0) i32[this.base(older) + S_NEWER] = newer;
    else i32[H_OLDEST] = newer;
  }
}

/** The table of zone `decl` (created, or found again after a reload, through src/core/shared.ts). */
export function sharedTable(decl: ZoneDecl<unknown>): SharedTable {
  return new SharedTable(sharedZone(`${decl.tag}:${decl.name}`, decl.size));
}

/**
 * Milliseconds on the system's monotonic clock, the same in every thread
 * (nginx's ngx_current_msec): performance.now() counts from each thread's
 * own start, so it is shifted onto process.hrtime's base once.
 */
const MONOTONIC_SHIFT = Number(process.hrtime.bigint()) / 1e6 - performance.now();

export function monotonicMs(): number {
  return Math.floor(performance.now() + MONOTONIC_SHIFT);
}

/**
 * Server-side TLS session caches (`ssl_session_cache`): `builtin` is a
 * per-worker map; `shared:NAME:SIZE` is one store for every worker, kept in
 * a SharedArrayBuffer zone (src/core/shared.ts) so a session established on
 * one worker resumes on another, as with nginx's shared memory zone.
 *
 * Shared zone layout: a header (lock, write position, insert counter, and
 * the three rotating ticket keys nginx keeps in the same zone), a
 * set-associative index (4 entries per bucket: hash, offset, sequence) and
 * a ring of records. New sessions are appended to the ring, overwriting the
 * oldest ones (nginx evicts the least recently used; a FIFO ring is the
 * lock-cheap equivalent). An index entry whose record was overwritten no
 * longer matches its sequence number and is ignored.
 */
import { sharedZone } from '../core/shared.ts';

export interface SessionStore {
  get(id: Buffer): Buffer | undefined;
  set(id: Buffer, session: Buffer, expiresSec: number): void;
  remove(id: Buffer): void;
}

/** nginx does not cache sessions larger than this (NGX_SSL_MAX_SESSION_SIZE). */
export const MAX_SESSION_SIZE = 4096;

const nowSec = (): number => Math.floor(Date.now() / 1000);

/** `builtin[:size]`: a cache of this worker only. */
export class BuiltinSessionCache implements SessionStore {
  private readonly map = new Map<string, { data: Buffer; expires: number }>();
  private readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  get(id: Buffer): Buffer | undefined {
    const key = id.toString('latin1');
    const e = this.map.get(key);
    if (!e) return undefined;
    if (e.expires < nowSec()) { this.map.delete(key); return undefined; }
    return e.data;
  }

  set(id: Buffer, session: Buffer, expiresSec: number): void {
    const key = id.toString('latin1');
    this.map.delete(key);
    if (this.map.size >= this.max) this.map.delete(this.map.keys().next().value as string);
    this.map.set(key, { data: session, expires: expiresSec });
  }

  remove(id: Buffer): void {
    this.map.delete(id.toString('latin1'));
  }
}

const HDR_LOCK = 0;
const HDR_WRITE = 1;
const HDR_SEQ = 2;
/** Byte offset of the ticket keys: 3 × 96 bytes (expire f64, size u32, pad, name 16, hmac 32, aes 32). */
export const TICKET_KEYS_OFFSET = 16;
export const TICKET_KEY_BYTES = 96;
const HEADER_BYTES = TICKET_KEYS_OFFSET + 3 * TICKET_KEY_BYTES;
const WAYS = 4;
const ENTRY_BYTES = 12;
const REC_HEADER = 16;

/** The shared zone of a session cache, with its lock (also used for the ticket keys it holds). */
export class SharedSessionCache implements SessionStore {
  readonly buf: SharedArrayBuffer;
  private readonly i32: Int32Array;
  private readonly u8: Uint8Array;
  private readonly view: DataView;
  private readonly buckets: number;
  private readonly indexStart = HEADER_BYTES;
  private readonly ringStart: number;
  private readonly ringSize: number;

  constructor(name: string, size: number, kind = 'ssl_session_cache') {
    this.buf = sharedZone(`${kind}:${name}`, size);
    this.i32 = new Int32Array(this.buf);
    this.u8 = new Uint8Array(this.buf);
    this.view = new DataView(this.buf);
    this.buckets = Math.max(16, Math.floor(size / 16 / (WAYS * ENTRY_BYTES)));
    this.ringStart = this.indexStart + this.buckets * WAYS * ENTRY_BYTES;
    this.ringSize = size - this.ringStart;
  }

  /** Runs `fn` holding the zone's lock (a spin lock: every critical section is a few microseconds). */
  locked<T>(fn: () => T): T {
    while (Atomics.compareExchange(this.i32, HDR_LOCK, 0, 1) !== 0) Atomics.wait(this.i32, HDR_LOCK, 1, 1);
    try {
      return fn();
    } finally {
      Atomics.store(this.i32, HDR_LOCK, 0);
      Atomics.notify(this.i32, HDR_LOCK, 1);
    }
  }

  get view8(): Uint8Array {
    return this.u8;
  }

  get dataView(): DataView {
    return this.view;
  }

  /** FNV-1a of the id (0 marks a free entry): ids are random, and nginx's cache hashes them with a CRC32, not a digest. */
  private hash(id: Buffer): number {
    let h = 0x811c9dc5;
    for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id[i], 0x01000193);
    return (h >>> 0) || 1;
  }

  private bucketOffset(h: number): number {
    return this.indexStart + (h % this.buckets) * WAYS * ENTRY_BYTES;
  }

  /** Finds the record of `id`: [entry offset, record offset], or undefined. */
  private find(id: Buffer, h: number): [number, number] | undefined {
    const b = this.bucketOffset(h);
    for (let w = 0; w < WAYS; w++) {
      const e = b + w * ENTRY_BYTES;
      if (this.view.getUint32(e, true) !== h) continue;
      const rec = this.view.getUint32(e + 4, true);
      const seq = this.view.getUint32(e + 8, true);
      if (this.view.getUint32(rec + 8, true) !== seq) continue;
      const idLen = this.u8[rec + 12];
      if (idLen !== id.length || !id.equals(this.u8.subarray(rec + REC_HEADER, rec + REC_HEADER + idLen))) continue;
      return [e, rec];
    }
    return undefined;
  }

  get(id: Buffer): Buffer | undefined {
    const h = this.hash(id);
    return this.locked(() => {
      const found = this.find(id, h);
      if (!found) return undefined;
      const rec = found[1];
      if (this.view.getUint32(rec + 4, true) < nowSec()) return undefined;
      const total = this.view.getUint32(rec, true);
      return Buffer.from(this.u8.subarray(rec + REC_HEADER + id.length, rec + total));
    });
  }

  set(id: Buffer, session: Buffer, expiresSec: number): void {
    const total = REC_HEADER + id.length + session.length;
    const padded = (total + 7) & ~7;
    if (id.length > 255 || padded > this.ringSize / 4) return;
    const h = this.hash(id);
    this.locked(() => {
      let pos = this.view.getUint32(HDR_WRITE * 4, true);
      if (pos + padded > this.ringSize) pos = 0;
      const rec = this.ringStart + pos;
      const seq = (this.view.getUint32(HDR_SEQ * 4, true) + 1) >>> 0 || 1;
      this.view.setUint32(HDR_SEQ * 4, seq, true);
      this.view.setUint32(HDR_WRITE * 4, pos + padded, true);
      this.view.setUint32(rec, total, true);
      this.view.setUint32(rec + 4, expiresSec, true);
      this.view.setUint32(rec + 8, seq, true);
      this.u8[rec + 12] = id.length;
      this.u8.set(id, rec + REC_HEADER);
      this.u8.set(session, rec + REC_HEADER + id.length);
      // the entry for this id, else a free or stale one, else the oldest way
      const b = this.bucketOffset(h);
      let slot = this.find(id, h)?.[0] ?? -1;
      if (slot < 0) {
        let oldestSeq = Infinity;
        let oldest = b;
        for (let w = 0; w < WAYS; w++) {
          const e = b + w * ENTRY_BYTES;
          const s = this.view.getUint32(e + 8, true);
          if (s === 0 || this.view.getUint32(this.view.getUint32(e + 4, true) + 8, true) !== s) { slot = e; break; }
          if (s < oldestSeq) { oldestSeq = s; oldest = e; }
        }
        if (slot < 0) slot = oldest;
      }
      this.view.setUint32(slot, h, true);
      this.view.setUint32(slot + 4, rec, true);
      this.view.setUint32(slot + 8, seq, true);
    });
  }

  remove(id: Buffer): void {
    const h = this.hash(id);
    this.locked(() => {
      const found = this.find(id, h);
      if (found) this.view.setUint32(found[0] + 8, 0, true);
    });
  }
}

const sharedCaches = new Map<string, SharedSessionCache>();

/** The shared cache `name` of this thread (one object per zone); `kind` separates zone namespaces. */
export function sharedSessionCache(name: string, size: number, kind = 'ssl_session_cache'): SharedSessionCache {
  const key = `${kind}:${name}:${size}`;
  let c = sharedCaches.get(key);
  if (!c) {
    c = new SharedSessionCache(name, size, kind);
    sharedCaches.set(key, c);
  }
  return c;
}

/**
 * A `lua_shared_dict` (OpenResty's ngx_http_lua_shdict): keys with a string,
 * number or boolean value, user flags and an expiry, seen synchronously by
 * every worker thread. Two shared zones (src/core/shared.ts): the index, a
 * SharedTable (src/core/shared-zone.ts: hash, LRU, its lock), and the value
 * heap, chunks of CHUNK bytes handed out first-fit from a bitmap. When a
 * `set` finds no room, the least recently used entries go (OpenResty's
 * "forcible" store); `safe_set`/`safe_add` fail with "no memory" instead.
 *
 * A slot's three numbers: expiry (wall-clock ms, 0 never), the value (a
 * number or boolean's, or a string's first chunk × 2^32 + its length), and
 * type + flags × 8.
 */
import { SharedTable } from '../core/shared-zone.ts';

const CHUNK = 32;
export const TYPE_BOOLEAN = 1;
export const TYPE_NUMBER = 3;
export const TYPE_STRING = 4;
/** A list (lpush …): its items encoded as listItems reads them, in the heap as a string's bytes are. */
export const TYPE_LIST = 5;
const TWO32 = 2 ** 32;

export type DictValue = { type: number; num: number; bytes: Uint8Array | undefined; flags: number };

export class SharedDict {
  readonly table: SharedTable;
  private readonly bits: Int32Array;
  private readonly heap: Uint8Array;
  private readonly chunks: number;
  private readonly heapAt: number;

  constructor(index: SharedArrayBuffer, values: SharedArrayBuffer) {
    this.table = new SharedTable(index);
    this.chunks = Math.floor((values.byteLength * 8) / (CHUNK * 8 + 1)) & ~31;
    this.bits = new Int32Array(values, 0, this.chunks / 32);
    this.heapAt = this.chunks / 8;
    this.heap = new Uint8Array(values);
  }

  get capacity(): number {
    return this.table.capacity * 128 + this.chunks * CHUNK;
  }

  /** Bytes of free value chunks (under the lock). */
  freeSpace(): number {
    let used = 0;
    for (let i = 0; i < this.bits.length; i++) {
      let w = this.bits[i];
      while (w) { w &= w - 1; used++; }
    }
    return (this.chunks - used) * CHUNK;
  }

  private alloc(n: number): number {
    const bits = this.bits;
    let run = 0;
    for (let i = 0; i < this.chunks; i++) {
      if ((i & 31) === 0 && bits[i >> 5] === -1) { run = 0; i += 31; continue; }
      if (bits[i >> 5] & (1 << (i & 31))) { run = 0; continue; }
      if (++run === n) {
        const start = i - n + 1;
        for (let j = start; j <= i; j++) bits[j >> 5] |= 1 << (j & 31);
        return start;
      }
    }
    return -1;
  }

  private release(start: number, len: number): void {
    const n = Math.ceil(len / CHUNK);
    for (let j = start; j < start + n; j++) this.bits[j >> 5] &= ~(1 << (j & 31));
  }

  private v(slot: number): number {
    return this.table.values(slot);
  }

  private typeOf(slot: number): number {
    return this.table.f64[this.v(slot) + 2] % 8;
  }

  private freeValue(slot: number): void {
    const f = this.table.f64;
    const v = this.v(slot);
    const type = f[v + 2] % 8;
    if (type === TYPE_STRING || type === TYPE_LIST) {
      const packed = f[v + 1];
      const len = packed % TWO32;
      if (len > 0) this.release(Math.floor(packed / TWO32), len);
    }
  }

  /** Removes `slot` and its value. */
  remove(slot: number): void {
    this.freeValue(slot);
    this.table.remove(slot);
  }

  expired(slot: number, now: number): boolean {
    const exp = this.table.f64[this.v(slot)];
    return exp !== 0 && exp <= now;
  }

  /** The live slot of `key` (an expired one is removed unless `stale`), or 0. */
  find(key: string, now: number, stale = false): number {
    const h = this.table.prepare(key);
    const slot = this.table.find(h);
    if (slot === 0) return 0;
    if (!stale && this.expired(slot, now)) {
      this.remove(slot);
      return 0;
    }
    return slot;
  }

  read(slot: number): DictValue {
    const f = this.table.f64;
    const v = this.v(slot);
    const type = f[v + 2] % 8;
    const flags = Math.floor(f[v + 2] / 8);
    if (type !== TYPE_STRING && type !== TYPE_LIST) return { type, num: f[v + 1], bytes: undefined, flags };
    const packed = f[v + 1];
    const len = packed % TWO32;
    const at = this.heapAt + Math.floor(packed / TWO32) * CHUNK;
    return { type, num: 0, bytes: this.heap.subarray(at, at + len), flags };
  }

  /**
   * Stores a value under the lock: `write` copies a string's bytes to the heap offset given.
   * Returns [ok, err, forcible]. `evict` false is safe_set/safe_add.
   */
  store(key: string, type: number, num: number, len: number, write: ((heap: Uint8Array, at: number) => void) | undefined,
    exptime: number, flags: number, evict: boolean, now: number): [boolean, string | undefined, boolean] {
    const t = this.table;
    let forcible = false;
    const h = t.prepare(key);
    let slot = t.find(h);
    if (slot !== 0) this.freeValue(slot);
    let chunk = 0;
    const inHeap = (type === TYPE_STRING || type === TYPE_LIST) && len > 0;
    if (inHeap) {
      const need = Math.ceil(len / CHUNK);
      while ((chunk = this.alloc(need)) < 0) {
        const victim = this.victim(slot, now, evict);
        if (victim === 0) {
          if (slot !== 0) t.remove(slot);
          return [false, 'no memory', forcible];
        }
        forcible ||= !this.expired(victim, now);
        this.remove(victim);
      }
      write!(this.heap, this.heapAt + chunk * CHUNK);
    }
    if (slot === 0) {
      while ((slot = t.insert(h)) === 0) {
        const victim = this.victim(0, now, evict);
        if (victim === 0) {
          if (inHeap) this.release(chunk, len);
          return [false, 'no memory', forcible];
        }
        forcible ||= !this.expired(victim, now);
        this.remove(victim);
        t.prepare(key);
      }
    } else t.touch(slot);
    const v = this.v(slot);
    t.f64[v] = exptime > 0 ? now + exptime * 1000 : 0;
    t.f64[v + 1] = type === TYPE_STRING || type === TYPE_LIST ? chunk * TWO32 + len : num;
    t.f64[v + 2] = type + flags * 8;
    return [true, undefined, forcible];
  }

  /** An entry to drop for room: an expired one if `evict` is false, else the least recently used. */
  private victim(keep: number, now: number, evict: boolean): number {
    for (let s = this.table.oldest(), n = 0; s !== 0 && n < 30; n++) {
      if (s !== keep && (evict || this.expired(s, now))) return s;
      s = this.newer(s);
    }
    return 0;
  }

  private newer(slot: number): number {
    return this.table.newer(slot);
  }

  isNumber(slot: number): boolean {
    return this.typeOf(slot) === TYPE_NUMBER;
  }

  setNumber(slot: number, n: number): void {
    this.table.f64[this.v(slot) + 1] = n;
    this.table.touch(slot);
  }

  setExpiry(slot: number, exptime: number, now: number): void {
    this.table.f64[this.v(slot)] = exptime > 0 ? now + exptime * 1000 : 0;
  }

  /** Seconds left (0: never expires). */
  ttl(slot: number, now: number): number {
    const exp = this.table.f64[this.v(slot)];
    return exp === 0 ? 0 : Math.max(0, (exp - now) / 1000);
  }

  /** Keys from the most recently used, up to `max` (0: all), skipping expired ones. */
  keys(max: number, now: number): string[] {
    const out: string[] = [];
    for (let s = this.table.newest(); s !== 0 && (max === 0 || out.length < max); s = this.table.older(s)) {
      if (!this.expired(s, now)) out.push(this.table.keyAt(s));
    }
    return out;
  }

  /** Removes every entry (flush_all) or the expired ones, up to `max` (0: all); returns how many. */
  flush(onlyExpired: boolean, max: number, now: number): number {
    let n = 0;
    let s = this.table.oldest();
    while (s !== 0 && (max === 0 || n < max)) {
      const next = this.newer(s);
      if (!onlyExpired || this.expired(s, now)) {
        this.remove(s);
        n++;
      }
      s = next;
    }
    return n;
  }
}

/** A list item: a string's bytes or a number. */
export type ListItem = Uint8Array | number;

/** A list's items from its stored bytes: per item a type byte, then 8 bytes of double or 4 of length and the bytes. */
export function listItems(bytes: Uint8Array): ListItem[] {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  const out: ListItem[] = [];
  for (let at = 0; at < b.length;) {
    if (b[at] === TYPE_NUMBER) {
      out.push(b.readDoubleLE(at + 1));
      at += 9;
    } else {
      const len = b.readUInt32LE(at + 1);
      out.push(Uint8Array.prototype.slice.call(b, at + 5, at + 5 + len));
      at += 5 + len;
    }
  }
  return out;
}

/** The stored bytes of a list (listItems' inverse). */
export function listBytes(items: ListItem[]): Buffer {
  const parts: Buffer[] = [];
  for (const item of items) {
    if (typeof item === 'number') {
      const p = Buffer.alloc(9);
      p[0] = TYPE_NUMBER;
      p.writeDoubleLE(item, 1);
      parts.push(p);
    } else {
      const p = Buffer.alloc(5);
      p[0] = TYPE_STRING;
      p.writeUInt32LE(item.length, 1);
      parts.push(p, Buffer.from(item.buffer, item.byteOffset, item.length));
    }
  }
  return Buffer.concat(parts);
}

/**
 * Counters every worker of the gateway shares (APISIX's shared dicts, such
 * as limit-count's `plugin-limit-count`): one shared zone, made by the
 * master while it loads the configuration (`gateway_route` asks for it) and
 * handed to the workers, holding a table of windows keyed by text.
 */
import { sharedZone } from '../../core/shared.ts';
import { SharedTable } from '../../core/shared-zone.ts';

const ZONE_KEY = 'gateway:counters';
const ZONE_BYTES = 4 * 1024 * 1024;

/** Makes the zone in this thread (the master, at configuration time). */
export function declareCounters(): void {
  sharedZone(ZONE_KEY, ZONE_BYTES);
}

let table: SharedTable | undefined;

function sharedCounters(): SharedTable {
  return (table ??= new SharedTable(sharedZone(ZONE_KEY, ZONE_BYTES)));
}

/** The slot of `key` (made, evicting the least recently used when full); call with the lock held. */
function slotOf(t: SharedTable, hash: number): number {
  let slot = t.find(hash);
  if (slot !== 0) {
    t.touch(slot);
    return slot;
  }
  slot = t.insert(hash);
  if (slot === 0) {
    // full: the least recently used entry goes, as a shared dict's LRU eviction
    t.remove(t.oldest());
    slot = t.insert(hash);
  }
  return slot;
}

/**
 * Runs `fn` on the values of `key`'s slot (three numbers from `f64[v]`, all 0
 * in a new slot) with the table locked: the shared state of limit-req,
 * limit-count, limit-conn, health checks and ewma.
 */
export function withSlot<T>(key: string, fn: (f: Float64Array, v: number, now: number) => T): T {
  const t = sharedCounters();
  const hash = t.prepare(key);
  const now = Date.now();
  t.lock();
  try {
    return fn(t.f64, t.values(slotOf(t, hash)), now);
  } finally {
    t.unlock();
  }
}

/**
 * lua-resty-limit-traffic's leaky bucket (limit-req): the excess of
 * requests over `rate` per second after this one, in requests, or -1 when
 * it is over `burst` (then it is not counted). Keys share the table with
 * count windows, so callers prefix them.
 */
export function leakyBucket(key: string, rate: number, burst: number): number {
  return withSlot(key, (f, v, now) => {
    // values: [excess in 1/1000 request, last time (ms), 1 once used]
    let excess = 0;
    if (f[v + 2] === 1) excess = Math.max(f[v] - Math.abs(now - f[v + 1]) * rate + 1000, 0);
    if (excess > burst * 1000) return -1;
    f[v] = excess;
    f[v + 1] = now;
    f[v + 2] = 1;
    return excess / 1000;
  });
}

/**
 * Counts one hit on `key` in a fixed window of `windowMs`: the hits before
 * this one (capped at `limit`: a refused hit is not counted) and the ms the
 * window has left, or -1 when this hit opened the window.
 */
export function countHit(key: string, windowMs: number, limit: number): { used: number; leftMs: number } {
  return withSlot(key, (f, v, now) => {
    // values: [window end (ms), hits]
    if (f[v] <= now) {
      f[v] = now + windowMs;
      f[v + 1] = 1;
      return { used: 0, leftMs: -1 };
    }
    const used = f[v + 1];
    if (used < limit) f[v + 1] = used + 1;
    return { used, leftMs: f[v] - now };
  });
}

/** Adds `delta` to the count of `key` and returns the new count (limit-conn's connections in flight). */
export function addToCount(key: string, delta: number): number {
  return withSlot(key, (f, v) => {
    f[v] = Math.max(0, f[v] + delta);
    return f[v];
  });
}

/** Runs `fn` on `key`'s values with the table locked, or returns undefined when the key has no slot (nothing is made). */
export function peekSlot<T>(key: string, fn: (f: Float64Array, v: number) => T): T | undefined {
  const t = sharedCounters();
  const hash = t.prepare(key);
  t.lock();
  try {
    const slot = t.find(hash);
    return slot === 0 ? undefined : fn(t.f64, t.values(slot));
  } finally {
    t.unlock();
  }
}

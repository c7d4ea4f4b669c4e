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

/**
 * Counts one hit on `key` in a fixed window of `windowMs`: the hits before
 * this one (capped at `limit`: a refused hit is not counted) and the ms the
 * window has left, or -1 when this hit opened the window.
 */
export function countHit(key: string, windowMs: number, limit: number): { used: number; leftMs: number } {
  table ??= new SharedTable(sharedZone(ZONE_KEY, ZONE_BYTES));
  const t = table;
  const hash = t.prepare(key);
  const now = Date.now();
  t.lock();
  try {
    let slot = t.find(hash);
    if (slot === 0) {
      slot = t.insert(hash);
      if (slot === 0) {
        // full: the least recently used window goes, as a shared dict's LRU eviction
        t.remove(t.oldest());
        slot = t.insert(hash);
      }
    } else t.touch(slot);
    const v = t.values(slot);
    const f = t.f64;
    if (f[v] <= now) {
      f[v] = now + windowMs;
      f[v + 1] = 1;
      return { used: 0, leftMs: -1 };
    }
    const used = f[v + 1];
    if (used < limit) f[v + 1] = used + 1;
    return { used, leftMs: f[v] - now };
  } finally {
    t.unlock();
  }
}

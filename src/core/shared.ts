/**
 * Counters every worker shares through one SharedArrayBuffer (nginx keeps
 * these in shared memory): the connection number shown as `*N` in logs and
 * used by `$connection` (also the count of accepted connections), and
 * nginx's ngx_stat_* counters that stub_status shows (STAT).
 */
const SLOTS = 8;
let counters = new Int32Array(new SharedArrayBuffer(SLOTS * 4));

/** The buffer the master creates once and hands to every worker. */
export function createSharedCounters(): SharedArrayBuffer {
  return new SharedArrayBuffer(SLOTS * 4);
}

export function useSharedCounters(buf: SharedArrayBuffer): void {
  counters = new Int32Array(buf);
}

export function nextConnectionNumber(): number {
  return Atomics.add(counters, 0, 1) + 1;
}

/** Connections numbered so far: nginx's accepted and handled counts. */
export function connectionsAccepted(): number {
  return Atomics.load(counters, 0);
}

/**
 * nginx's ngx_stat_active, _requests, _reading and _writing: HTTP
 * connections open, requests read, connections reading a request head,
 * requests being answered.
 */
export const STAT = { ACTIVE: 4, REQUESTS: 5, READING: 6, WRITING: 7 } as const;

export function statAdd(slot: number, n: number): void {
  Atomics.add(counters, slot, n);
}

export function statValue(slot: number): number {
  return Atomics.load(counters, slot);
}

/**
 * Named shared zones (nginx's shared memory zones: `ssl_session_cache
 * shared:NAME:SIZE`, and the like). The master creates a zone while it loads
 * the configuration and hands every zone to the workers with their start
 * and reload messages, so a worker loading the same configuration gets the
 * very same memory. A zone lives as long as the process (a reload with the
 * same name and size keeps its contents).
 */
const zones = new Map<string, SharedArrayBuffer>();

/** The zone `key` (its name includes what it is for) of `size` bytes; made here if this thread has none. */
export function sharedZone(key: string, size: number): SharedArrayBuffer {
  const k = `${key}/${size}`;
  let z = zones.get(k);
  if (!z) {
    z = new SharedArrayBuffer(size);
    zones.set(k, z);
  }
  return z;
}

/** Every zone made or adopted so far (the master sends these to workers). */
export function allSharedZones(): Map<string, SharedArrayBuffer> {
  return zones;
}

/** A worker takes the master's zones before it loads a configuration. */
export function adoptSharedZones(from: Map<string, SharedArrayBuffer> | undefined): void {
  if (from) for (const [k, z] of from) if (!zones.has(k)) zones.set(k, z);
}

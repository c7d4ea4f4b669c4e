/**
 * Counters every worker shares through one SharedArrayBuffer (nginx keeps
 * these in shared memory): the connection number shown as `*N` in logs and
 * used by `$connection`, and the request counter behind `$request_id` input.
 */
const SLOTS = 4;
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

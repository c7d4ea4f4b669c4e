/**
 * The worker's pools of idle cosocket connections (tcpsock:setkeepalive),
 * keyed as OpenResty keys them: `host:port`, the unix path, or the `pool`
 * option of connect. Each pool keeps at most its size (the first
 * setkeepalive's, or lua_socket_pool_size) and drops the least recently
 * parked connection when full; a parked connection that gets data, is
 * closed by its peer or outlives its timeout is closed and forgotten.
 */
import type { CosocketStream } from './socket-stream.ts';

interface Parked {
  stream: CosocketStream;
  timer: NodeJS.Timeout | undefined;
}

interface Pool {
  size: number;
  idle: Parked[];
}

const pools = new Map<string, Pool>();

/** An idle connection of pool `key`, most recently parked first, or undefined. */
export function takeIdle(key: string): CosocketStream | undefined {
  const pool = pools.get(key);
  const p = pool?.idle.pop();
  if (!p) return undefined;
  if (p.timer) clearTimeout(p.timer);
  p.stream.onIdleEvent = undefined;
  p.stream.socket.ref();
  p.stream.reused++;
  return p.stream;
}

/** Parks `stream` in pool `key` for `timeoutMs` (0: no limit). */
export function park(key: string, stream: CosocketStream, timeoutMs: number, size: number): void {
  let pool = pools.get(key);
  if (!pool) pools.set(key, (pool = { size, idle: [] }));
  if (pool.idle.length >= pool.size) {
    const oldest = pool.idle.shift()!;
    forget(oldest);
  }
  const parked: Parked = { stream, timer: undefined };
  const drop = () => {
    const i = pool.idle.indexOf(parked);
    if (i >= 0) pool.idle.splice(i, 1);
    forget(parked);
  };
  if (timeoutMs > 0) parked.timer = setTimeout(drop, timeoutMs);
  // any event on an idle connection (data, close) makes it unusable, as ngx_http_lua_socket_keepalive_close_handler says
  stream.onIdleEvent = drop;
  stream.socket.unref();
  pool.idle.push(parked);
}

function forget(p: Parked): void {
  if (p.timer) clearTimeout(p.timer);
  p.stream.onIdleEvent = undefined;
  p.stream.socket.destroy();
}

/** Closes every parked connection (the worker stops). */
export function closeIdle(): void {
  for (const pool of pools.values()) for (const p of pool.idle.splice(0)) forget(p);
}

/**
 * tcpsock:connect's two halves that do not touch the socket table: the
 * options (`pool`, `pool_size`, `backlog`, checked with OpenResty's
 * messages) and opening the connection with its timeout, its failures
 * logged as OpenResty logs them.
 */
import net from 'node:net';
import { LuaError, T } from '../../../lua/bridge.ts';
import type { LuaBridge } from '../../../lua/bridge.ts';
import { LogLevel } from '../../../core/error-log.ts';
import { strerror } from '../../../conf/errors.ts';
import { connectFailure } from '../../../upstream/connect-failure.ts';
import { logFor } from './runtime.ts';
import type { HookContext } from './runtime.ts';
import { CosocketStream } from './socket-stream.ts';
import type { TcpCosocket } from './api-socket-tcp.ts';

/** Connects `s` to `addr` (an IP and port, or a unix path); resolves with an error message or undefined. */
export function openStream(s: TcpCosocket, ctx: HookContext, target: { host: string; port: number } | { path: string },
  name: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const sock = net.connect('host' in target && s.local
      ? { ...target, localAddress: s.local.address, localPort: s.local.port }
      : target);
    const ms = s.connectTimeout || s.settings.connectTimeout;
    const timer = setTimeout(() => {
      sock.destroy();
      if (s.settings.logErrors) logFor(ctx, LogLevel.error, `lua tcp socket connect timed out, when connecting to ${name}`);
      resolve('timeout');
    }, ms);
    sock.once('connect', () => {
      clearTimeout(timer);
      if (s.gone) {
        sock.destroy();
        return resolve('closed');
      }
      s.stream = new CosocketStream(sock);
      resolve(undefined);
    });
    sock.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      const { level, message } = connectFailure(e, name, 'path' in target);
      // lua_socket_log_errors silences only the later check's line, not connect()'s own (ngx_event_connect_peer's)
      if (message.startsWith('connect() to ') || s.settings.logErrors) logFor(ctx, level, message);
      const text = strerror(e.code);
      resolve(text.charAt(0).toLowerCase() + text.slice(1));
    });
  });
}

/** connect's options table at `idx`: pool, pool_size, backlog (checked as OpenResty checks them). */
export function readConnectOptions(bridge: LuaBridge, L: number, idx: number): { pool?: string; poolSize?: number } {
  const out: { pool?: string; poolSize?: number } = {};
  if (bridge.type(L, idx) !== T.TABLE) return out;
  const bad = (msg: string) => new LuaError(`bad argument #${idx} to '?' (${msg})`, 1);
  const t = bridge.getField(L, idx, 'pool_size');
  if (t === T.NUMBER) {
    const n = bridge.toInteger(L, -1) ?? 0;
    if (n <= 0) throw bad(`bad "pool_size" option value: ${n}`);
    out.poolSize = n;
  } else if (t !== T.NIL) throw bad(`bad "pool_size" option type: ${bridge.typeName(L, -1)}`);
  bridge.api.lua_settop(L, -2);
  const b = bridge.getField(L, idx, 'backlog');
  if (b === T.NUMBER && (bridge.toInteger(L, -1) ?? 0) < 0) throw bad(`bad "backlog" option value: ${bridge.toInteger(L, -1)}`);
  bridge.api.lua_settop(L, -2);
  const p = bridge.getField(L, idx, 'pool');
  if (p === T.STRING || p === T.NUMBER) out.pool = bridge.toString(L, -1);
  else if (p !== T.NIL) throw bad(`bad "pool" option type: ${bridge.typeName(L, -1)}`);
  bridge.api.lua_settop(L, -2);
  return out;
}

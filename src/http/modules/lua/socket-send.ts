/**
 * What tcpsock:send and udpsock:send take: a string, a number (as LuaJIT
 * prints it), a boolean, nil, or an array table of strings and numbers
 * (nested), joined into one buffer; and TCP_NODELAY on a connection's
 * first send.
 */
import { LuaError, T } from '../../../lua/bridge.ts';
import type { LuaBridge } from '../../../lua/bridge.ts';
import { LogLevel } from '../../../core/error-log.ts';
import { coreLoc } from '../../core/settings.ts';
import { logFor } from './runtime.ts';
import type { HookContext } from './runtime.ts';
import type { CosocketStream } from './socket-stream.ts';

/** The first send on a connection sets TCP_NODELAY when `tcp_nodelay` is on, as OpenResty's send does. */
export function noDelay(stream: CosocketStream, ctx: HookContext): void {
  if (stream.nodelay) return;
  stream.nodelay = true;
  if (ctx.r && ctx.r.level.get(coreLoc).tcpNodelay === false) return;
  logFor(ctx, LogLevel.debug, 'lua socket tcp_nodelay');
  stream.socket.setNoDelay(true);
}

export function sendData(bridge: LuaBridge, L: number, idx: number): Buffer {
  const t = bridge.type(L, idx);
  switch (t) {
    case T.STRING:
    case T.NUMBER: return bridge.toBuffer(L, idx)!;
    case T.NIL: return Buffer.from('nil');
    case T.BOOLEAN: return Buffer.from(bridge.toBoolean(L, idx) ? 'true' : 'false');
    case T.TABLE: {
      const parts: Buffer[] = [];
      flatten(bridge, L, idx < 0 ? bridge.api.lua_gettop(L) + idx + 1 : idx, parts);
      return parts.length === 1 ? parts[0] : Buffer.concat(parts);
    }
  }
  throw new LuaError(`bad argument #2 to '?' (string, number, boolean, nil, or array table expected, got ${bridge.typeName(L, idx)})`);
}

function flatten(bridge: LuaBridge, L: number, idx: number, out: Buffer[]): void {
  const { api } = bridge;
  const n = api.lua_rawlen(L, idx);
  for (let i = 1; i <= n; i++) {
    const t = api.lua_rawgeti(L, idx, BigInt(i));
    if (t === T.STRING || t === T.NUMBER) out.push(bridge.toBuffer(L, -1)!);
    else if (t === T.TABLE) flatten(bridge, L, api.lua_gettop(L), out);
    else {
      const name = bridge.typeName(L, -1);
      api.lua_settop(L, -2);
      throw new LuaError(`bad argument #2 to '?' (bad data type ${name} found)`);
    }
    api.lua_settop(L, -2);
  }
}

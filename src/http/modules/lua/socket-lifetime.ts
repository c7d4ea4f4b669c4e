/**
 * What the TCP and UDP cosockets share: the contexts that may use them, the
 * object a method was called on, and their tie to the request (or timer)
 * that made them: they are closed when it ends, as OpenResty's pool cleanup
 * closes them.
 */
import { LuaError, T } from '../../../lua/bridge.ts';
import type { LuaBridge } from '../../../lua/bridge.ts';
import { currentContext, refuseIn } from './runtime.ts';
import type { HookContext, LuaRuntime } from './runtime.ts';
import type { HttpRequest } from '../../request.ts';
import { luaSocketLoc, socketSettings, timerSocketSettings } from './socket-conf.ts';
import type { SocketSettings } from './socket-conf.ts';

/** Phases where OpenResty cannot yield (NGX_HTTP_LUA_CONTEXT_YIELDABLE leaves them out). */
const NOT_YIELDABLE = ['set', 'log', 'header_filter', 'body_filter', 'init_worker'];

export interface Closable {
  close(): void;
}

const owned = new WeakMap<object, Set<Closable>>();

/** The context of the running hook, refused where OpenResty refuses cosockets. */
export function socketContext(rt: LuaRuntime, level = 1): HookContext {
  const ctx = currentContext(rt);
  if (!ctx) throw new LuaError('API disabled in the context of init_by_lua*', level);
  refuseIn(ctx, NOT_YIELDABLE, level);
  return ctx;
}

/** What a socket is tied to: the main request (subrequests share it), or the timer's run. */
export function ownerOf(ctx: HookContext): object {
  return ctx.r ? mainRequest(ctx.r) : ctx;
}

export function mainRequest(r: HttpRequest): HttpRequest {
  let m = r;
  while (m.parent) m = m.parent;
  return m;
}

/** The location's lua_socket_* settings (a timer has the http block's). */
export function settingsOf(ctx: HookContext): SocketSettings {
  return ctx.r ? socketSettings(ctx.r.level.get(luaSocketLoc)) : timerSocketSettings(ctx.runtime.conf);
}

export function own(owner: object, s: Closable): void {
  let set = owned.get(owner);
  if (!set) owned.set(owner, (set = new Set()));
  set.add(s);
}

export function disown(owner: object, s: Closable): void {
  owned.get(owner)?.delete(s);
}

/** The request or timer ended: its sockets still open are closed. */
export function closeSocketsOf(owner: object): void {
  const set = owned.get(owner);
  if (!set) return;
  owned.delete(owner);
  for (const s of set) s.close();
}

/** The id in the socket object at argument 1 (`bad argument #1` as OpenResty's luaL_checktype says it). */
export function objectId(bridge: LuaBridge, L: number, method: string): number {
  if (bridge.type(L, 1) !== T.TABLE) {
    throw new LuaError(`bad argument #1 to '${method}' (table expected, got ${bridge.typeName(L, 1)})`, 2);
  }
  bridge.api.lua_rawgeti(L, 1, 1n);
  const id = bridge.toInteger(L, -1) ?? 0;
  bridge.api.lua_settop(L, -2);
  return id;
}

/** `nil, err` (and more values): OpenResty's error returns. */
export function pushFailure(bridge: LuaBridge, L: number, err: string, partial?: Buffer): number {
  bridge.pushNil(L);
  bridge.pushString(L, err);
  if (partial === undefined) return 2;
  bridge.pushBytes(L, partial);
  return 3;
}

/** A timeout argument in ms (OpenResty: `bad timeout value` when it does not fit 31 bits). */
export function timeoutArg(bridge: LuaBridge, L: number, idx: number): number {
  const n = Math.trunc(bridge.toNumber(L, idx) ?? 0);
  if (n < 0 || n >= 2 ** 31) throw new LuaError('bad timeout value', 0);
  return n;
}

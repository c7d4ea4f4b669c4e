/**
 * Whole JavaScript values to Lua and back: arrays and plain objects become tables, tables become
 * arrays (1..n sequences) or objects. For configuration, tests and results read once; the hot
 * paths push and read single values with the bridge's typed calls.
 */
import { type HostFunction, type LuaBridge, LuaError, T } from './bridge.ts';

/** Pushes `v`: undefined/null → nil, numbers as pushJsNumber, strings latin1, Uint8Array bytes, functions as host functions. */
export function pushValue(bridge: LuaBridge, L: number, v: unknown, depth = 0): void {
  const { api } = bridge;
  switch (typeof v) {
    case 'undefined': return bridge.pushNil(L);
    case 'boolean': return bridge.pushBoolean(L, v);
    case 'number': return bridge.pushJsNumber(L, v);
    case 'bigint': return bridge.pushInteger(L, v);
    case 'string': return bridge.pushString(L, v);
    case 'function': return bridge.pushFunction(L, v as HostFunction);
  }
  if (v === null) return bridge.pushNil(L);
  if (v instanceof Uint8Array) return bridge.pushBytes(L, v);
  if (depth > 32) throw new LuaError('table too deep', 0);
  api.lua_checkstack(L, 3);
  if (Array.isArray(v)) {
    api.lua_createtable(L, v.length, 0);
    for (let i = 0; i < v.length; i++) {
      pushValue(bridge, L, v[i], depth + 1);
      api.lua_rawseti(L, -2, BigInt(i + 1));
    }
    return;
  }
  const entries = Object.entries(v as object);
  api.lua_createtable(L, 0, entries.length);
  for (const [k, value] of entries) {
    pushValue(bridge, L, value, depth + 1);
    bridge.setField(L, -2, k);
  }
}

/** The value at `idx` as JavaScript; functions, threads and userdata as '<function>' etc. */
export function toValue(bridge: LuaBridge, L: number, idx: number, depth = 0): unknown {
  const { api } = bridge;
  switch (api.lua_type(L, idx)) {
    case T.NIL:
    case T.NONE: return undefined;
    case T.BOOLEAN: return bridge.toBoolean(L, idx);
    case T.NUMBER: return api.lua_isinteger(L, idx) ? Number(api.lua_tointegerx(L, idx, 0)) : api.lua_tonumberx(L, idx, 0);
    case T.STRING: return bridge.toString(L, idx);
    case T.TABLE: return depth > 32 ? '<table>' : tableValue(bridge, L, idx, depth);
    case T.FUNCTION: return '<function>';
    case T.THREAD: return '<thread>';
    default: return '<userdata>';
  }
}

function tableValue(bridge: LuaBridge, L: number, idx: number, depth: number): unknown {
  const { api } = bridge;
  const t = api.lua_absindex(L, idx);
  const obj: Record<string, unknown> = {};
  let sequence = true;
  let count = 0;
  api.lua_checkstack(L, 3);
  api.lua_pushnil(L);
  while (api.lua_next(L, t)) {
    const keyType = api.lua_type(L, -2);
    // the key as a string without lua_tolstring on a number key (that would break lua_next)
    const key = keyType === T.STRING || keyType === T.NUMBER ? bridge.toString(L, -2)! : `<${keyType}>`;
    if (!(keyType === T.NUMBER && api.lua_isinteger(L, -2) && key === String(count + 1))) sequence = false;
    count++;
    obj[key] = toValue(bridge, L, -1, depth + 1);
    api.lua_settop(L, -2);
  }
  if (sequence && count > 0) return Array.from({ length: count }, (_, i) => obj[String(i + 1)]);
  return obj;
}

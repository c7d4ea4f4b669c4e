/**
 * lua-cjson as a host module (`require "cjson"`, `require "cjson.safe"`), as
 * OpenResty bundles it: encode walks the Lua value (a table whose keys are
 * all positive integers is an array; an empty table is `{}` unless
 * `encode_empty_table_as_object(false)`; `/` is escaped as `\/`; numbers as
 * `%.14g`), decode is JSON.parse over the text read as UTF-8, with strings
 * back as UTF-8 bytes and `null` as `cjson.null` (the NULL light userdata,
 * ngx.null). `cjson.safe` returns `nil, err` where `cjson` raises.
 */
import { type HostFunction, type LuaBridge, LuaError, T } from './bridge.ts';
import { formatLuaNumber } from './number-format.ts';

const MAX_DEPTH = 1000;

function escapeString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i];
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '/') out += '\\/';
    else if (c < 0x20 || c === 0x7f) {
      const named: Record<number, string> = { 8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r' };
      out += named[c] ?? '\\u' + c.toString(16).padStart(4, '0');
    } else out += ch;
  }
  return out + '"';
}

export function cjsonModule(bridge: LuaBridge, safe: boolean): HostFunction {
  const { api } = bridge;
  let emptyAsObject = true;

  const encodeAt = (L: number, idx: number, depth: number): string => {
    const t = bridge.type(L, idx);
    switch (t) {
      case T.NIL: return 'null';
      case T.BOOLEAN: return bridge.toBoolean(L, idx) ? 'true' : 'false';
      case T.NUMBER: {
        if (api.lua_isinteger(L, idx)) return bridge.toString(L, idx)!;
        const n = bridge.toNumber(L, idx)!;
        if (!Number.isFinite(n)) throw new LuaError('Cannot serialise number: must not be NaN or Infinity', 0);
        return formatLuaNumber(n);
      }
      case T.STRING: return escapeString(bridge.toString(L, idx)!);
      case T.LIGHTUSERDATA:
        if (api.lua_touserdata(L, idx) === 0) return 'null';
        break;
      case T.TABLE: return encodeTable(L, api.lua_absindex(L, idx), depth + 1);
    }
    throw new LuaError(`Cannot serialise ${bridge.typeName(L, idx)}: type not supported`, 0);
  };

  const encodeTable = (L: number, idx: number, depth: number): string => {
    if (depth > MAX_DEPTH) throw new LuaError(`Cannot serialise, excessive nesting (${depth})`, 0);
    api.lua_checkstack(L, 4);
    // an array when every key is a positive integer (lua-cjson's lua_array_length)
    let max = 0;
    let count = 0;
    let array = true;
    api.lua_pushnil(L);
    while (api.lua_next(L, idx)) {
      api.lua_settop(L, -2);
      const n = bridge.type(L, -1) === T.NUMBER ? bridge.toNumber(L, -1)! : NaN;
      if (Number.isInteger(n) && n >= 1) {
        max = Math.max(max, n);
        count++;
      } else array = false;
    }
    if (array && count === 0 && emptyAsObject) array = false;
    if (array) {
      if (max > 10 && max > count * 2) throw new LuaError('Cannot serialise table: excessively sparse array', 0);
      const parts: string[] = [];
      for (let i = 1; i <= max; i++) {
        api.lua_rawgeti(L, idx, BigInt(i));
        parts.push(encodeAt(L, -1, depth));
        api.lua_settop(L, -2);
      }
      return '[' + parts.join(',') + ']';
    }
    const parts: string[] = [];
    api.lua_pushnil(L);
    while (api.lua_next(L, idx)) {
      const kt = bridge.type(L, -2);
      if (kt !== T.STRING && kt !== T.NUMBER) throw new LuaError('Cannot serialise table: table key must be a number or string', 0);
      // read the key without converting it in place (that would confuse lua_next)
      api.lua_pushvalue(L, -2);
      const key = bridge.toString(L, -1)!;
      api.lua_settop(L, -2);
      parts.push(escapeString(key) + ':' + encodeAt(L, -1, depth));
      api.lua_settop(L, -2);
    }
    return '{' + parts.join(',') + '}';
  };

  const pushDecoded = (L: number, v: unknown, depth: number): void => {
    if (depth > MAX_DEPTH) throw new LuaError('Found too many nested data structures', 0);
    api.lua_checkstack(L, 3);
    if (v === null) api.lua_pushlightuserdata(L, 0);
    else if (typeof v === 'boolean') bridge.pushBoolean(L, v);
    else if (typeof v === 'number') bridge.pushJsNumber(L, v);
    else if (typeof v === 'string') bridge.pushBytes(L, Buffer.from(v, 'utf8'));
    else if (Array.isArray(v)) {
      api.lua_createtable(L, v.length, 0);
      v.forEach((item, i) => {
        pushDecoded(L, item, depth + 1);
        api.lua_rawseti(L, -2, BigInt(i + 1));
      });
    } else {
      const entries = Object.entries(v as object);
      api.lua_createtable(L, 0, entries.length);
      for (const [k, item] of entries) {
        bridge.pushBytes(L, Buffer.from(k, 'utf8'));
        pushDecoded(L, item, depth + 1);
        api.lua_rawset(L, -3);
      }
    }
  };

  const guarded = (fn: HostFunction): HostFunction => (L) => {
    if (!safe) return fn(L);
    try {
      return fn(L);
    } catch (e) {
      if (typeof e === 'number') throw e;
      bridge.pushNil(L);
      bridge.pushString(L, (e as Error).message);
      return 2;
    }
  };

  const fns: Record<string, HostFunction> = {
    encode: guarded((L) => {
      if (api.lua_gettop(L) !== 1) throw new LuaError("bad argument #1 to 'encode' (expected 1 argument)", 0);
      bridge.pushString(L, encodeAt(L, 1, 0));
      return 1;
    }),
    decode: guarded((L) => {
      const text = bridge.toBuffer(L, 1);
      if (text === undefined) throw new LuaError(`bad argument #1 to 'decode' (string expected, got ${bridge.typeName(L, 1)})`, 0);
      let v: unknown;
      try {
        v = JSON.parse(text.toString('utf8'));
      } catch {
        throw new LuaError(`Expected value but found invalid token at character 1`, 0);
      }
      pushDecoded(L, v, 0);
      return 1;
    }),
    encode_empty_table_as_object(L) {
      const t = bridge.type(L, 1);
      if (t !== T.NONE && t !== T.NIL) emptyAsObject = bridge.toBoolean(L, 1) || bridge.toString(L, 1) === 'on';
      bridge.pushBoolean(L, emptyAsObject);
      return 1;
    },
  };

  return (L) => {
    api.lua_createtable(L, 0, 8);
    bridge.setFunctions(L, -1, fns);
    api.lua_pushlightuserdata(L, 0);
    bridge.setField(L, -2, 'null');
    bridge.pushString(L, 'cjson');
    bridge.setField(L, -2, '_NAME');
    bridge.pushString(L, '2.1.0.10');
    bridge.setField(L, -2, '_VERSION');
    return 1;
  };
}

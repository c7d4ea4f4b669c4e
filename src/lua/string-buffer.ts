/**
 * LuaJIT's `string.buffer` (https://luajit.org/ext_buffer.html) as a host module: a FIFO of bytes
 * in wasm memory (malloc/realloc), so `put` is one copy from the Lua string and `get`/`tostring`
 * one copy into a new Lua string. Written in Lua it costs ~50× more (docs/lua.md).
 *
 * The object is a 16-byte userdata: u32 data pointer, capacity, read offset, write offset.
 * Methods: new/put/putf/get/set/skip/tostring/reset/free, `#buf`, `buf .. x`, `tostring(buf)`.
 * `get()` on an empty buffer is "" (as LuaJIT). Not here: encode/decode (serialization) and the
 * FFI-pointer methods (reserve/commit/ref).
 */
import { type HostFunction, type LuaBridge, LuaError, T } from './bridge.ts';

const META = 'buffer';

export function stringBufferModule(bridge: LuaBridge): HostFunction {
  const { api } = bridge;
  const meta = bridge.cname(META);

  const check = (L: number, fname: string): number => {
    const ud = api.luaL_testudata(L, 1, meta);
    if (!ud) throw new LuaError(`bad argument #1 to '${fname}' (buffer expected, got ${bridge.typeName(L, 1)})`);
    return ud;
  };
  // userdata are 8-aligned, so a field is one Uint32Array element
  const field = (ud: number, i: number) => bridge.u32()[(ud >> 2) + i]!;
  const setOffsets = (ud: number, r: number, w: number) => {
    const u32 = bridge.u32();
    u32[(ud >> 2) + 2] = r;
    u32[(ud >> 2) + 3] = w;
  };

  /** Room for `n` more bytes; returns the absolute address to write at. */
  const reserve = (ud: number, n: number): number => {
    let ptr = field(ud, 0);
    const cap = field(ud, 1);
    let r = field(ud, 2);
    let w = field(ud, 3);
    if (w + n <= cap) return ptr + w;
    const len = w - r;
    if (r > 0) {
      bridge.bytes().copyWithin(ptr, ptr + r, ptr + w);
      r = 0;
      w = len;
      setOffsets(ud, r, w);
      if (w + n <= cap) return ptr + w;
    }
    const size = Math.max(len + n, cap * 2, 32);
    const moved = api.realloc(ptr, size);
    if (!moved) throw new LuaError('not enough memory');
    ptr = moved;
    const u32 = bridge.u32();
    u32[ud >> 2] = ptr;
    u32[(ud >> 2) + 1] = size;
    return ptr + w;
  };
  const commit = (ud: number, n: number) => {
    bridge.u32()[(ud >> 2) + 3] += n;
  };

  /** Appends the value at `idx` (string, number, buffer); false if it is none of these. */
  const append = (L: number, ud: number, idx: number): boolean => {
    const type = api.lua_type(L, idx);
    if (type === T.STRING) {
      const view = bridge.stringView(L, idx)!;
      const at = reserve(ud, view.len);
      bridge.bytes().copyWithin(at, view.ptr, view.ptr + view.len);
      commit(ud, view.len);
      return true;
    }
    if (type === T.NUMBER) {
      const s = bridge.toString(L, idx)!;
      const at = reserve(ud, s.length);
      bridge.bytes().write(s, at, s.length, 'latin1');
      commit(ud, s.length);
      return true;
    }
    const other = api.luaL_testudata(L, idx, meta);
    if (!other) return false;
    const len = field(other, 3) - field(other, 2);
    const at = reserve(ud, len);
    const src = field(other, 0) + field(other, 2); // after reserve: `other` may be this buffer
    bridge.bytes().copyWithin(at, src, src + len);
    commit(ud, len);
    return true;
  };

  /** Pushes up to `n` bytes from the front and consumes them. */
  const take = (L: number, ud: number, n: number) => {
    const r = field(ud, 2);
    const w = field(ud, 3);
    const count = Math.max(0, Math.min(n, w - r));
    api.lua_pushlstring(L, field(ud, 0) + r, count);
    if (r + count === w) setOffsets(ud, 0, 0);
    else setOffsets(ud, r + count, w);
  };
  const pushContents = (L: number, ud: number) => {
    api.lua_pushlstring(L, field(ud, 0) + field(ud, 2), field(ud, 3) - field(ud, 2));
  };
  const release = (ud: number) => {
    const ptr = field(ud, 0);
    if (ptr) api.free(ptr);
    bridge.bytes().fill(0, ud, ud + 16);
  };
  const self = (L: number) => {
    api.lua_settop(L, 1);
    return 1;
  };

  const methods: Record<string, HostFunction> = {
    put(L) {
      const ud = check(L, 'put');
      const top = api.lua_gettop(L);
      for (let i = 2; i <= top; i++) {
        if (!append(L, ud, i)) throw new LuaError(`bad argument #${i - 1} to 'put' (string expected, got ${bridge.typeName(L, i)})`);
      }
      return self(L);
    },
    get(L) {
      const ud = check(L, 'get');
      const top = api.lua_gettop(L);
      if (top <= 1) {
        take(L, ud, Infinity);
        return 1;
      }
      api.lua_checkstack(L, top);
      for (let i = 2; i <= top; i++) {
        const n = api.lua_type(L, i) === T.NIL ? Infinity : bridge.toInteger(L, i);
        if (n === undefined) throw new LuaError(`bad argument #${i - 1} to 'get' (number expected, got ${bridge.typeName(L, i)})`);
        take(L, ud, n);
      }
      return top - 1;
    },
    set(L) {
      const ud = check(L, 'set');
      setOffsets(ud, 0, 0);
      if (!append(L, ud, 2)) throw new LuaError(`bad argument #1 to 'set' (string expected, got ${bridge.typeName(L, 2)})`);
      return self(L);
    },
    skip(L) {
      const ud = check(L, 'skip');
      const n = bridge.toInteger(L, 2);
      if (n === undefined) throw new LuaError(`bad argument #1 to 'skip' (number expected, got ${bridge.typeName(L, 2)})`);
      const r = field(ud, 2);
      const w = field(ud, 3);
      if (r + Math.max(0, n) >= w) setOffsets(ud, 0, 0);
      else setOffsets(ud, r + Math.max(0, n), w);
      return self(L);
    },
    reset(L) {
      setOffsets(check(L, 'reset'), 0, 0);
      return self(L);
    },
    free(L) {
      release(check(L, 'free'));
      return 0;
    },
    tostring(L) {
      pushContents(L, check(L, 'tostring'));
      return 1;
    },
    len(L) {
      const ud = check(L, 'len');
      bridge.pushInteger(L, field(ud, 3) - field(ud, 2));
      return 1;
    },
  };

  const concatPart = (L: number, idx: number) => {
    const ud = api.luaL_testudata(L, idx, meta);
    if (ud) return pushContents(L, ud);
    const s = bridge.toString(L, idx);
    if (s === undefined) throw new LuaError(`attempt to concatenate a ${bridge.typeName(L, idx)} value`);
    api.lua_pushvalue(L, idx);
  };

  const L0 = bridge.L;
  api.luaL_newmetatable(L0, meta);
  api.lua_createtable(L0, 0, 10);
  bridge.setFunctions(L0, -1, methods);
  bridge.setField(L0, -2, '__index');
  bridge.setFunctions(L0, -1, {
    __len: methods.len!,
    __tostring: methods.tostring!,
    __concat(L) {
      concatPart(L, 1);
      concatPart(L, 2);
      api.lua_concat(L, 2);
      return 1;
    },
    __gc(L) {
      const ud = api.lua_touserdata(L, 1);
      if (ud) release(ud);
      return 0;
    },
  });
  bridge.load(L0, 'local index = ...; function index.putf(self, ...) return self:put(string.format(...)) end', 'string.buffer');
  bridge.getField(L0, -2, '__index');
  bridge.call(L0, 1, 0);
  api.lua_settop(L0, -2);

  const create: HostFunction = (L) => {
    const size = bridge.toInteger(L, 1) ?? 0;
    const ud = api.lua_newuserdatauv(L, 16, 0);
    bridge.bytes().fill(0, ud, ud + 16);
    api.luaL_setmetatable(L, meta);
    if (size > 0) reserve(ud, size);
    return 1;
  };
  return (L) => {
    api.lua_createtable(L, 0, 1);
    bridge.setFunctions(L, -1, { new: create });
    return 1;
  };
}

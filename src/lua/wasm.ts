/**
 * Lua 5.4 compiled to WebAssembly, as wasmoon ships it (dist/glue.wasm), reached through its raw
 * exports. wasmoon's own wrappers (`cwrap`, ~55 ns a call, strings cut at NUL) are never used:
 * while wasmoon's emscripten factory loads, `WebAssembly.instantiate` is wrapped once to capture
 * the instance (about 4 ns a call) and to replace three imports:
 *   - `invoke_vii` (emscripten's setjmp for Lua's error handling) without the debug build's
 *     table-mirror assertion on every protected call;
 *   - `emscripten_resize_heap`, so the heap stops growing at the memory cap: Lua's allocator then
 *     gets NULL and raises "not enough memory", a catchable Lua error;
 *   - `system` and `exit`, refused even if Lua code reached them (os.execute/os.exit are removed).
 * One load per VM: each gets its own memory. Loads are serialized so the capture cannot mix two up.
 */
import { createRequire } from 'node:module';

// The few WebAssembly types used here (the DOM lib that declares them is not in this project's tsconfig).
interface WasmMemory {
  readonly buffer: ArrayBuffer;
}
interface WasmTable {
  get(index: number): unknown;
}
type Imports = Record<string, Record<string, unknown>>;
interface Instantiated {
  instance?: { exports: unknown };
}
type Instantiate = (bytes: unknown, imports?: Imports) => Promise<Instantiated>;
const WebAssemblyGlobal = (globalThis as unknown as { WebAssembly: { instantiate: Instantiate } }).WebAssembly;

/** The Lua C API as exported by glue.wasm: pointers are numbers, lua_Integer is a bigint. */
export interface LuaExports {
  readonly memory: WasmMemory;
  readonly __indirect_function_table: WasmTable;
  malloc(size: number): number;
  realloc(ptr: number, size: number): number;
  free(ptr: number): void;
  stackSave(): number;
  stackRestore(sp: number): void;
  setThrew(threw: number, value: number): void;
  luaL_newstate(): number;
  luaL_openlibs(L: number): void;
  luaL_loadbufferx(L: number, buf: number, size: number, name: number, mode: number): number;
  luaL_traceback(L: number, L1: number, msg: number, level: number): void;
  luaL_ref(L: number, t: number): number;
  luaL_unref(L: number, t: number, ref: number): void;
  luaL_len(L: number, idx: number): bigint;
  luaL_where(L: number, level: number): void;
  luaL_newmetatable(L: number, tname: number): number;
  luaL_setmetatable(L: number, tname: number): void;
  luaL_testudata(L: number, idx: number, tname: number): number;
  lua_concat(L: number, n: number): void;
  lua_close(L: number): void;
  lua_newthread(L: number): number;
  lua_resetthread(L: number): number;
  lua_gettop(L: number): number;
  lua_settop(L: number, idx: number): void;
  lua_absindex(L: number, idx: number): number;
  lua_pushvalue(L: number, idx: number): void;
  lua_rotate(L: number, idx: number, n: number): void;
  lua_copy(L: number, from: number, to: number): void;
  lua_checkstack(L: number, n: number): number;
  lua_xmove(from: number, to: number, n: number): void;
  lua_type(L: number, idx: number): number;
  lua_isinteger(L: number, idx: number): number;
  lua_isstring(L: number, idx: number): number;
  lua_tonumberx(L: number, idx: number, isnum: number): number;
  lua_tointegerx(L: number, idx: number, isnum: number): bigint;
  lua_toboolean(L: number, idx: number): number;
  lua_tolstring(L: number, idx: number, len: number): number;
  lua_rawlen(L: number, idx: number): number;
  lua_touserdata(L: number, idx: number): number;
  lua_tothread(L: number, idx: number): number;
  lua_topointer(L: number, idx: number): number;
  lua_pushnil(L: number): void;
  lua_pushnumber(L: number, n: number): void;
  lua_pushinteger(L: number, n: bigint): void;
  lua_pushlstring(L: number, s: number, len: number): number;
  lua_pushcclosure(L: number, fn: number, n: number): void;
  lua_pushboolean(L: number, b: number): void;
  lua_pushlightuserdata(L: number, p: number): void;
  lua_getglobal(L: number, name: number): number;
  lua_getfield(L: number, idx: number, k: number): number;
  lua_gettable(L: number, idx: number): number;
  lua_rawget(L: number, idx: number): number;
  lua_rawgeti(L: number, idx: number, n: bigint): number;
  lua_createtable(L: number, narr: number, nrec: number): void;
  lua_newuserdatauv(L: number, size: number, nuv: number): number;
  lua_getmetatable(L: number, idx: number): number;
  lua_setglobal(L: number, name: number): void;
  lua_setfield(L: number, idx: number, k: number): void;
  lua_settable(L: number, idx: number): void;
  lua_rawset(L: number, idx: number): void;
  lua_rawseti(L: number, idx: number, n: bigint): void;
  lua_setmetatable(L: number, idx: number): number;
  lua_pcallk(L: number, nargs: number, nresults: number, errfunc: number, ctx: number, k: number): number;
  lua_callk(L: number, nargs: number, nresults: number, ctx: number, k: number): void;
  lua_yieldk(L: number, nresults: number, ctx: number, k: number): number;
  lua_resume(L: number, from: number, nargs: number, nresults: number): number;
  lua_status(L: number): number;
  lua_isyieldable(L: number): number;
  lua_error(L: number): number;
  lua_next(L: number, idx: number): number;
  lua_setupvalue(L: number, funcindex: number, n: number): number;
}

/** Views of the wasm heap, renewed when it grows (reading `memory.buffer` on every access is slow). */
export interface HeapViews {
  bytes: Buffer;
  u32: Uint32Array;
}

export interface LuaWasm {
  readonly api: LuaExports;
  readonly heap: HeapViews;
  /** Adds a JavaScript function to the wasm function table; returns its index (a C function pointer). */
  addFunction(fn: (...args: number[]) => number, signature: string): number;
}

interface WasmoonModule {
  addFunction(fn: (...args: number[]) => number, signature: string): number;
}

const require = createRequire(import.meta.url);
let loading: Promise<unknown> = Promise.resolve();

/** Instantiates a fresh Lua wasm module whose heap never grows past `memoryLimit` bytes. */
export function loadLuaWasm(memoryLimit: number): Promise<LuaWasm> {
  const next = loading.then(() => instantiate(memoryLimit));
  loading = next.catch(() => undefined);
  return next;
}

async function instantiate(memoryLimit: number): Promise<LuaWasm> {
  const wasmoon = require('wasmoon') as { LuaWasm: { initialize(): Promise<{ module: WasmoonModule }> } };
  const original = WebAssemblyGlobal.instantiate;
  let api: LuaExports | undefined;
  const heap: HeapViews = { bytes: Buffer.alloc(0), u32: new Uint32Array(0) };
  const renewViews = () => {
    heap.bytes = Buffer.from(api!.memory.buffer);
    heap.u32 = new Uint32Array(api!.memory.buffer);
  };
  WebAssemblyGlobal.instantiate = (bytes, imports) => {
    // only wasmoon's module (another library may instantiate wasm on this thread meanwhile)
    const env = imports?.env as Record<string, (...a: number[]) => number> | undefined;
    if (!env?.invoke_vii || !env.emscripten_resize_heap || api) return original(bytes, imports);
    patchImports(env, () => api!, memoryLimit, renewViews);
    return original(bytes, imports).then((r) => {
      api = r.instance?.exports as LuaExports;
      return r;
    });
  };
  let lua: { module: WasmoonModule };
  try {
    lua = await wasmoon.LuaWasm.initialize();
  } finally {
    WebAssemblyGlobal.instantiate = original;
  }
  if (!api) throw new Error('lua: could not capture the wasm exports of wasmoon');
  const module = lua.module;
  renewViews();
  return { api, heap, addFunction: (fn, signature) => module.addFunction(fn, signature) };
}

function patchImports(env: Record<string, (...a: number[]) => number>, api: () => LuaExports, memoryLimit: number, grown: () => void): void {
  const resize = env.emscripten_resize_heap;
  env.emscripten_resize_heap = (requested: number) => {
    if ((requested >>> 0) > memoryLimit) return 0;
    const ok = resize(requested);
    if (ok) grown();
    return ok;
  };
  env.system = () => -1;
  env.exit = () => {
    throw new Error('lua: exit() is not available');
  };
  // Lua's luaD_rawrunprotected: setjmp through a JavaScript frame; a longjmp is `throw Infinity`.
  let table: WasmTable | undefined;
  const fns: Array<((a: number, b: number) => void) | undefined> = [];
  env.invoke_vii = (index: number, a: number, b: number) => {
    const lua = api();
    const sp = lua.stackSave();
    try {
      let fn = fns[index];
      if (fn === undefined) {
        table ??= lua.__indirect_function_table;
        fn = fns[index] = table.get(index) as (a: number, b: number) => void;
      }
      fn(a, b);
    } catch (e) {
      lua.stackRestore(sp);
      if (e !== (e as number) + 0) throw e;
      lua.setThrew(1, 0);
    }
    return 0;
  };
}

/**
 * A thin typed bridge over Lua's C API in wasm (see wasm.ts): values in and out of a Lua stack,
 * binary safe (strings are bytes: a JavaScript string here is latin1, one char per byte, or a
 * Buffer), chunks loaded under OpenResty's names, and JavaScript functions callable from Lua.
 *
 * Every host function goes through one trampoline (a single wasm table entry; the function's id is
 * the closure's light-userdata upvalue). A host function reads its arguments from the stack, pushes
 * its results and returns their count. It must not let a JavaScript exception escape into Lua
 * (that breaks the VM after a few hundred escapes): the trampoline turns a thrown exception into a
 * Lua error with luaL_error's position prefix, and only Lua's own longjmp (`throw Infinity` from
 * a raw API call that raised) passes through.
 *
 * A host function may instead return `bridge.suspend(promise, onResume)`: the coroutine yields
 * (lua_yieldk with one shared continuation), the runner in coroutine.ts awaits the promise and
 * resumes; the continuation then calls `onResume` inside the coroutine, which pushes the results
 * or throws (a Lua error raised at the call site, as if the function had failed there).
 */
import type { HeapViews, LuaExports, LuaWasm } from './wasm.ts';
import { formatLuaNumber } from './number-format.ts';

export const LUA_REGISTRYINDEX = -1001000;
const UPVALUE1 = LUA_REGISTRYINDEX - 1;
/** Strings shorter than this leave wasm memory through Buffer's pool (allocUnsafe pools below half its size). */
const SMALL_COPY = Buffer.poolSize >>> 1;

/** lua_Integer arguments are bigints: the small ones (registry refs, counts) made once, not per call. */
const SMALL_BIGINTS = Array.from({ length: 4096 }, (_, i) => BigInt(i));
function bigintOf(n: number): bigint {
  return n >= 0 && n < 4096 && Number.isInteger(n) ? SMALL_BIGINTS[n] : BigInt(n);
}
export const T = { NONE: -1, NIL: 0, BOOLEAN: 1, LIGHTUSERDATA: 2, NUMBER: 3, STRING: 4, TABLE: 5, FUNCTION: 6, USERDATA: 7, THREAD: 8 } as const;
export const STATUS = { OK: 0, YIELD: 1, ERRRUN: 2, ERRSYNTAX: 3, ERRMEM: 4, ERRERR: 5 } as const;
/** What a host function returns to make its coroutine wait. */
export const SUSPEND = -1;

/** Reads its arguments from `L`'s stack (1..top), pushes results, returns their count (or SUSPEND). */
export type HostFunction = (L: number) => number;
/** Runs inside the resumed coroutine with what the awaited promise gave; pushes results, returns their count. */
export type ResumeHandler<V> = (L: number, value: V) => number;

/** Thrown by a host function to raise a Lua error; `level: 0` leaves out the "chunk:line:" prefix. */
export class LuaError extends Error {
  readonly level: number;
  constructor(message: string, level = 1) {
    super(message);
    this.level = level;
  }
}

/** A chunk that did not compile; the message is Lua's ("content_by_lua(nginx.conf:40):1: ..."). */
export class LuaSyntaxError extends Error {}

export interface Suspension {
  readonly promise: Promise<unknown>;
  readonly onResume: ResumeHandler<unknown>;
  /** The coroutine that suspended (set by the trampoline). */
  thread: number;
  /** A parent waiting for its child's suspension (user coroutines): the outcome goes on to that one. */
  readonly relayTo?: Suspension;
  /** Lets go of what the wait holds (a timer) when the coroutine is killed instead of resumed. */
  readonly cancel?: () => void;
}

/** How a suspension ended: given to the continuation when the runner resumes the coroutine. */
export type Resumption =
  | { readonly ok: true; readonly value: unknown; readonly suspension: Suspension }
  | { readonly ok: false; readonly error: unknown; readonly suspension: Suspension };

export class LuaBridge {
  readonly api: LuaExports;
  /** The main state. */
  readonly L: number;
  private readonly fns: Array<HostFunction | undefined> = [undefined];
  private readonly freeIds: number[] = [];
  private readonly trampoline: number;
  private readonly continuation: number;
  /** The heap's views; `bytes()`/`u32()` read them at each use since the heap may grow. */
  private readonly heap: HeapViews;
  private scratch = 0;
  private scratchSize = 0;
  /** 16 bytes of wasm memory for out-parameters (lengths, counts). */
  readonly outPtr: number;
  private readonly names = new Map<string, number>();
  /** Set by a host function that suspends, taken by the coroutine runner right after lua_resume. */
  suspended: Suspension | undefined;
  /** Set by the runner before it resumes a suspended coroutine; taken by the continuation. */
  resumption: Resumption | undefined;

  constructor(wasm: LuaWasm) {
    this.api = wasm.api;
    this.heap = wasm.heap;
    this.L = this.api.luaL_newstate();
    if (!this.L) throw new Error('lua: cannot create a state (memory cap too low?)');
    this.outPtr = this.api.malloc(16);
    this.trampoline = wasm.addFunction((L: number) => this.callHost(L), 'ii');
    this.continuation = wasm.addFunction((L: number) => this.continueHost(L), 'iiii');
  }

  // ---- memory ----

  /** A Buffer over the whole wasm heap (a new one after the heap has grown: do not keep it across calls into Lua). */
  bytes(): Buffer {
    return this.heap.bytes;
  }
  /** The heap as 32-bit words (index = address / 4), same rule as bytes(). */
  u32(): Uint32Array {
    return this.heap.u32;
  }

  /** A scratch area of at least `size` bytes (valid until the next call). */
  private scratchFor(size: number): number {
    if (size > this.scratchSize) {
      if (this.scratch) this.api.free(this.scratch);
      this.scratchSize = Math.max(size, 256, this.scratchSize * 2);
      this.scratch = this.api.malloc(this.scratchSize);
      if (!this.scratch) {
        this.scratchSize = 0;
        throw new LuaError('not enough memory', 0);
      }
    }
    return this.scratch;
  }

  /** A NUL-terminated copy of an ASCII name, kept for the VM's life (field and global names). */
  cname(name: string): number {
    let ptr = this.names.get(name);
    if (ptr === undefined) {
      ptr = this.api.malloc(name.length + 1);
      const heap = this.bytes();
      heap.write(name, ptr, name.length, 'latin1');
      heap[ptr + name.length] = 0;
      this.names.set(name, ptr);
    }
    return ptr;
  }

  // ---- pushing ----

  pushNil(L: number): void {
    this.api.lua_pushnil(L);
  }
  pushBoolean(L: number, b: boolean): void {
    this.api.lua_pushboolean(L, b ? 1 : 0);
  }
  pushInteger(L: number, n: number | bigint): void {
    this.api.lua_pushinteger(L, typeof n === 'bigint' ? n : bigintOf(n));
  }
  pushNumber(L: number, n: number): void {
    this.api.lua_pushnumber(L, n);
  }
  /** A JavaScript number: a Lua integer when it is a safe integer, else a float. */
  pushJsNumber(L: number, n: number): void {
    if (Number.isSafeInteger(n)) this.api.lua_pushinteger(L, BigInt(n));
    else this.api.lua_pushnumber(L, n);
  }
  /** A string of bytes: each char code (0..255) is one byte. */
  pushString(L: number, s: string): void {
    const len = s.length;
    const ptr = this.scratchFor(len);
    this.bytes().write(s, ptr, len, 'latin1');
    this.api.lua_pushlstring(L, ptr, len);
  }
  pushBytes(L: number, b: Uint8Array): void {
    const ptr = this.scratchFor(b.length);
    this.bytes().set(b, ptr);
    this.api.lua_pushlstring(L, ptr, b.length);
  }
  // ---- host functions ----

  /** Registers a host function once; the id is what pushFunctionId pushes. */
  register(fn: HostFunction): number {
    const id = this.freeIds.pop() ?? this.fns.length;
    this.fns[id] = fn;
    return id;
  }
  unregister(id: number): void {
    this.fns[id] = undefined;
    this.freeIds.push(id);
  }
  pushFunctionId(L: number, id: number): void {
    this.api.lua_pushlightuserdata(L, id);
    this.api.lua_pushcclosure(L, this.trampoline, 1);
  }
  /** Registers and pushes: for functions created once (library tables), not per call. */
  pushFunction(L: number, fn: HostFunction): void {
    this.pushFunctionId(L, this.register(fn));
  }
  /** Sets `t[name] = fn` for each entry, `t` at `index`. */
  setFunctions(L: number, index: number, fns: Record<string, HostFunction>): void {
    const t = this.api.lua_absindex(L, index);
    for (const [name, fn] of Object.entries(fns)) {
      this.pushFunction(L, fn);
      this.api.lua_setfield(L, t, this.cname(name));
    }
  }

  /** Makes the running coroutine wait for `promise`; the host function returns what this returns. */
  suspend<V>(promise: Promise<V>, onResume: ResumeHandler<V> = () => 0, cancel?: () => void): number {
    this.suspended = { promise, onResume: onResume as ResumeHandler<unknown>, thread: 0, cancel };
    return SUSPEND;
  }

  /**
   * For coroutine.resume (compat.lua): true when the coroutine just resumed from `L` yielded because
   * a host function suspended it, not by coroutine.yield.
   */
  childSuspended(L: number): boolean {
    return this.suspended !== undefined && this.suspended.thread !== L;
  }

  /** Makes `L` wait for its child's suspension too; when resumed, the outcome is kept for the child. */
  relayChild(L: number): number {
    const child = this.suspended!;
    this.suspended = { promise: child.promise, onResume: child.onResume, thread: L, relayTo: child, cancel: child.cancel };
    return SUSPEND;
  }

  private callHost(L: number): number {
    let n: number;
    try {
      n = this.fns[this.api.lua_touserdata(L, UPVALUE1)]!(L);
    } catch (e) {
      return this.raise(L, e);
    }
    return n === SUSPEND ? this.yieldFor(L) : n;
  }

  private continueHost(L: number): number {
    const r = this.resumption;
    this.resumption = undefined;
    if (!r) return 0;
    if (r.suspension.relayTo) {
      // a parent coroutine resumed: its Lua wrapper resumes the child, whose continuation takes this
      this.resumption = { ...r, suspension: r.suspension.relayTo };
      return 0;
    }
    let n: number;
    try {
      if (!r.ok) throw r.error;
      n = r.suspension.onResume(L, r.value);
    } catch (e) {
      return this.raise(L, e);
    }
    return n === SUSPEND ? this.yieldFor(L) : n;
  }

  private yieldFor(L: number): number {
    this.suspended!.thread = L;
    if (!this.api.lua_isyieldable(L)) {
      this.suspended = undefined;
      return this.raise(L, new LuaError('attempt to yield across a C-call boundary'));
    }
    return this.api.lua_yieldk(L, 0, 0, this.continuation);
  }

  /** Raises `e` as a Lua error in `L` (does not return: Lua longjmps). */
  private raise(L: number, e: unknown): number {
    if (typeof e === 'number') throw e; // Lua's own longjmp, raised inside a raw API call
    const level = e instanceof LuaError ? e.level : 1;
    const message = e instanceof Error ? e.message : String(e);
    if (level > 0) this.api.luaL_where(L, level);
    this.pushString(L, message);
    if (level > 0) this.api.lua_concat(L, 2);
    return this.api.lua_error(L);
  }

  // ---- reading ----

  type(L: number, idx: number): number {
    return this.api.lua_type(L, idx);
  }
  toBoolean(L: number, idx: number): boolean {
    return this.api.lua_toboolean(L, idx) !== 0;
  }
  /** A number (integers as numbers, precision lost past 2^53), or undefined if not convertible. */
  toNumber(L: number, idx: number): number | undefined {
    const n = this.api.lua_tonumberx(L, idx, this.outPtr);
    return this.heap.u32[this.outPtr >> 2] ? n : undefined;
  }
  /** An integer as Lua converts it (floats with an exact integer value, numeric strings), else undefined. */
  toInteger(L: number, idx: number): number | undefined {
    const n = this.api.lua_tointegerx(L, idx, this.outPtr);
    return this.heap.u32[this.outPtr >> 2] ? Number(n) : undefined;
  }
  /** A string's bytes as a latin1 string; numbers formatted as LuaJIT does; undefined otherwise. */
  toString(L: number, idx: number): string | undefined {
    const t = this.api.lua_type(L, idx);
    if (t === T.STRING) {
      const ptr = this.api.lua_tolstring(L, idx, this.outPtr);
      return this.heap.bytes.toString('latin1', ptr, ptr + this.heap.u32[this.outPtr >> 2]!);
    }
    if (t === T.NUMBER) return this.numberString(L, idx);
    return undefined;
  }
  /**
   * A string's bytes, copied out of wasm memory; numbers as toString; undefined otherwise.
   * `lastByte`: one more byte after them (ngx.say's newline without a concatenated Lua string).
   */
  toBuffer(L: number, idx: number, lastByte?: number): Buffer | undefined {
    const t = this.api.lua_type(L, idx);
    if (t === T.NUMBER) {
      const s = this.numberString(L, idx);
      return Buffer.from(lastByte === undefined ? s : s + String.fromCharCode(lastByte), 'latin1');
    }
    if (t !== T.STRING) return undefined;
    const ptr = this.api.lua_tolstring(L, idx, this.outPtr);
    const len = this.heap.u32[this.outPtr >> 2]!;
    const size = lastByte === undefined ? len : len + 1;
    // small strings: a pooled Buffer and one copy (a new ArrayBuffer costs about 1.5 µs, ten
    // times as much); large ones: ArrayBuffer#slice, one allocation and one memcpy, no pool
    if (size >= SMALL_COPY && lastByte === undefined) {
      return Buffer.from((this.heap.bytes.buffer as ArrayBuffer).slice(ptr, ptr + len));
    }
    const out = Buffer.allocUnsafe(size);
    this.heap.bytes.copy(out, 0, ptr, ptr + len);
    if (lastByte !== undefined) out[len] = lastByte;
    return out;
  }
  /** Where a string's bytes are in wasm memory (valid while the string is on the stack). */
  stringView(L: number, idx: number): { ptr: number; len: number } | undefined {
    if (this.api.lua_type(L, idx) !== T.STRING) return undefined;
    const ptr = this.api.lua_tolstring(L, idx, this.outPtr);
    return { ptr, len: this.heap.u32[this.outPtr >> 2]! };
  }
  private numberString(L: number, idx: number): string {
    if (this.api.lua_isinteger(L, idx)) return this.api.lua_tointegerx(L, idx, 0).toString();
    return formatLuaNumber(this.api.lua_tonumberx(L, idx, 0));
  }
  // ---- tables, globals, chunks ----

  getGlobal(L: number, name: string): number {
    return this.api.lua_getglobal(L, this.cname(name));
  }
  setGlobal(L: number, name: string): void {
    this.api.lua_setglobal(L, this.cname(name));
  }
  getField(L: number, idx: number, name: string): number {
    return this.api.lua_getfield(L, idx, this.cname(name));
  }
  setField(L: number, idx: number, name: string): void {
    this.api.lua_setfield(L, idx, this.cname(name));
  }
  /** Pops the value on top into the registry; returns its reference. */
  ref(L: number): number {
    return this.api.luaL_ref(L, LUA_REGISTRYINDEX);
  }
  unref(ref: number): void {
    this.api.luaL_unref(this.L, LUA_REGISTRYINDEX, ref);
  }
  pushRef(L: number, ref: number): void {
    this.api.lua_rawgeti(L, LUA_REGISTRYINDEX, bigintOf(ref));
  }

  /** Compiles a chunk and pushes its function; `name` appears in messages as given (OpenResty's `content_by_lua(nginx.conf:40)`). */
  load(L: number, code: string | Uint8Array, name: string): void {
    const bytes = typeof code === 'string' ? Buffer.from(code, 'latin1') : code;
    const chunkName = '=' + name;
    const ptr = this.scratchFor(bytes.length + chunkName.length + 1);
    const heap = this.bytes();
    heap.set(bytes, ptr);
    const namePtr = ptr + bytes.length;
    heap.write(chunkName, namePtr, chunkName.length, 'latin1');
    heap[namePtr + chunkName.length] = 0;
    const status = this.api.luaL_loadbufferx(L, ptr, bytes.length, namePtr, 0);
    if (status !== STATUS.OK) {
      const message = this.toString(L, -1) ?? 'unknown error';
      this.api.lua_settop(L, -2);
      throw new LuaSyntaxError(message);
    }
  }

  /** Calls the function below `nargs` arguments on `L` (not yieldable); throws the Lua error message. */
  call(L: number, nargs: number, nresults: number): void {
    const status = this.api.lua_pcallk(L, nargs, nresults, 0, 0, 0);
    if (status !== STATUS.OK) {
      const message = this.toString(L, -1) ?? `(error object is a ${this.typeName(L, -1)} value)`;
      this.api.lua_settop(L, -2);
      throw new Error(message);
    }
  }

  typeName(L: number, idx: number): string {
    return ['no value', 'nil', 'boolean', 'userdata', 'number', 'string', 'table', 'function', 'userdata', 'thread'][this.api.lua_type(L, idx) + 1]!;
  }

  close(): void {
    this.api.lua_close(this.L);
  }
}

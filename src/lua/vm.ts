/**
 * One Lua VM per worker, shared by that worker's requests, as OpenResty has one per nginx worker.
 * The Lua module (src/http/modules/lua/runtime.ts) creates it (LuaVm.create) in each worker when
 * the configuration uses Lua; it compiles each chunk once (`load`) and runs it per request in its
 * own coroutine (`run`).
 *
 * What the VM sets up before any user code: Lua 5.4's standard libraries, the LuaJIT/5.1
 * compatibility layer and sandbox (compat.lua), `require` and `io.open` on the real filesystem
 * (package.lua, io.lua), and
 * the built-in modules (`string.buffer`; later `ngx.*`, `resty.core*`, `cjson`), which win over
 * files of the same name on package.path because package.preload is searched first.
 *
 * Memory: the wasm heap stops growing at `memoryLimit` (wasm.ts); past it Lua's allocator fails
 * and the allocating code gets a Lua "not enough memory" error; the VM stays usable. The heap
 * never shrinks (WebAssembly memory cannot), so the limit is the worker's Lua high-water mark.
 */
import fs from 'node:fs';
import { type HostFunction, LuaBridge, T } from './bridge.ts';
import { CoroutineRunner, type LuaOutcome, type RunOptions, type RunningCoroutine } from './coroutine.ts';
import { ioHelpers } from './io.ts';
import { DEFAULT_PACKAGE_CPATH, DEFAULT_PACKAGE_PATH, packageHelpers } from './package.ts';
import { stringBufferModule } from './string-buffer.ts';
import { cjsonModule } from './cjson.ts';
import { loadLuaWasm } from './wasm.ts';
import { toValue } from './convert.ts';

export interface LuaVmOptions {
  /** Bytes the wasm heap may grow to (default 256 MiB). */
  readonly memoryLimit?: number;
  /** Where Lua's `print` goes until the hook modules replace it (OpenResty: error.log at notice). */
  readonly print?: (text: string) => void;
}

/** A compiled chunk: a registry reference to its function. */
export type LuaChunk = number & { readonly __luaChunk: unique symbol };

export interface LoadOptions {
  /** Gives the chunk its own global table (reads fall back to _G), as OpenResty isolates each chunk. */
  readonly ownGlobals?: boolean;
}

const luaSource = (name: string) => fs.readFileSync(new URL(name, import.meta.url));

export class LuaVm {
  readonly bridge: LuaBridge;
  readonly runner: CoroutineRunner;

  private constructor(bridge: LuaBridge) {
    this.bridge = bridge;
    this.runner = new CoroutineRunner(bridge);
  }

  static async create(options: LuaVmOptions = {}): Promise<LuaVm> {
    const bridge = new LuaBridge(await loadLuaWasm(options.memoryLimit ?? 256 * 1024 * 1024));
    const vm = new LuaVm(bridge);
    vm.setUp(options.print ?? ((text) => process.stdout.write(text + '\n')));
    return vm;
  }

  private setUp(print: (text: string) => void): void {
    const { bridge } = this;
    const { api, L } = bridge;
    api.luaL_openlibs(L);
    this.runLibrary('compat.lua', {
      print: (L1) => {
        print(bridge.toString(L1, 1) ?? '');
        return 0;
      },
      child_suspended: (L1) => {
        bridge.pushBoolean(L1, bridge.childSuspended(L1));
        return 1;
      },
      relay: (L1) => bridge.relayChild(L1),
      table_new: (L1) => {
        const narr = bridge.toInteger(L1, 1) ?? 0;
        const nrec = bridge.toInteger(L1, 2) ?? 0;
        api.lua_createtable(L1, Math.max(0, Math.min(narr, 1 << 26)), Math.max(0, Math.min(nrec, 1 << 26)));
        return 1;
      },
    });
    this.runLibrary('package.lua', packageHelpers(bridge));
    this.runLibrary('io.lua', ioHelpers(bridge));
    this.setPackagePath(DEFAULT_PACKAGE_PATH, DEFAULT_PACKAGE_CPATH);
    this.defineModule('string.buffer', stringBufferModule(bridge));
    this.defineModule('cjson', cjsonModule(bridge, false));
    this.defineModule('cjson.safe', cjsonModule(bridge, true));
  }

  /** Runs a Lua file of src/lua with a table of host functions as its argument. */
  private runLibrary(file: string, helpers: Record<string, HostFunction>): void {
    const { bridge } = this;
    bridge.load(bridge.L, luaSource(file), file);
    bridge.api.lua_createtable(bridge.L, 0, Object.keys(helpers).length);
    bridge.setFunctions(bridge.L, -1, helpers);
    bridge.call(bridge.L, 1, 0);
  }

  /** A built-in module: `open` pushes the module's value; package.preload, so it wins over files. */
  defineModule(name: string, open: HostFunction): void {
    const { bridge } = this;
    const { api, L } = bridge;
    bridge.getGlobal(L, 'package');
    bridge.getField(L, -1, 'preload');
    bridge.pushFunction(L, open);
    bridge.setField(L, -2, name);
    api.lua_settop(L, -3);
  }

  /** lua_package_path / lua_package_cpath, already expanded (`;;` replaced by the caller). */
  setPackagePath(path: string, cpath?: string): void {
    const { bridge } = this;
    const { L } = bridge;
    bridge.getGlobal(L, 'package');
    bridge.pushString(L, path);
    bridge.setField(L, -2, 'path');
    if (cpath !== undefined) {
      bridge.pushString(L, cpath);
      bridge.setField(L, -2, 'cpath');
    }
    bridge.api.lua_settop(L, -2);
  }

  /** Compiles a chunk once (lua_code_cache on); throws LuaSyntaxError with Lua's message. */
  load(code: string | Uint8Array, name: string, options: LoadOptions = {}): LuaChunk {
    const { bridge } = this;
    const { api, L } = bridge;
    bridge.load(L, code, name);
    if (options.ownGlobals) {
      api.lua_createtable(L, 0, 0);
      api.lua_createtable(L, 0, 1);
      bridge.getGlobal(L, '_G');
      bridge.setField(L, -2, '__index');
      api.lua_setmetatable(L, -2);
      api.lua_setupvalue(L, -2, 1);
    }
    return bridge.ref(L) as LuaChunk;
  }

  /** Forgets a chunk compiled by `load` (a reload, lua_code_cache off). */
  unload(chunk: LuaChunk): void {
    this.bridge.unref(chunk);
  }

  /**
   * Runs a chunk in a new coroutine with `context` attached (what host functions find in
   * `running.context`). Synchronous when the chunk never waits; a promise when it did.
   */
  run<R = undefined>(chunk: LuaChunk, context: unknown, options?: RunOptions<R>): LuaOutcome<R> | Promise<LuaOutcome<R>> {
    return this.runner.run(chunk, context, options);
  }

  /** The coroutine running now (inside a host function), or null. */
  get running(): RunningCoroutine | null {
    return this.runner.running;
  }

  /** Evaluates code on the main state (init_by_lua, tests); returns its results as JavaScript values. */
  eval(code: string, name = 'eval'): unknown[] {
    const { bridge } = this;
    const { api, L } = bridge;
    const base = api.lua_gettop(L);
    bridge.load(L, code, name);
    bridge.call(L, 0, -1);
    const values: unknown[] = [];
    for (let i = base + 1; i <= api.lua_gettop(L); i++) values.push(toValue(bridge, L, i));
    api.lua_settop(L, base);
    return values;
  }

  /** Sets global `name` to a table of host functions (the `ngx` table is built this way). */
  setGlobalTable(name: string, fns: Record<string, HostFunction>): void {
    const { bridge } = this;
    const { api, L } = bridge;
    if (bridge.getGlobal(L, name) !== T.TABLE) {
      api.lua_settop(L, -2);
      api.lua_createtable(L, 0, Object.keys(fns).length);
    }
    bridge.setFunctions(L, -1, fns);
    bridge.setGlobal(L, name);
  }

  close(): void {
    this.bridge.close();
  }
}

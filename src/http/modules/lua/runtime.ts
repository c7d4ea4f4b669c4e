/**
 * A worker's Lua: one VM per configuration generation (a reload starts a
 * fresh one, as OpenResty's new workers do), the `ngx` table built on it,
 * each hook compiled the first time it runs, and the per-hook context host
 * functions find their request in.
 */
import fs from 'node:fs';
import path from 'node:path';
import { LuaError, LuaSyntaxError } from '../../../lua/bridge.ts';
import { abortedMessage } from '../../../lua/coroutine.ts';
import { luajitSyntaxMessage } from '../../../lua/luajit-messages.ts';
import type { KillSignal, LuaOutcome, RunOptions } from '../../../lua/coroutine.ts';
import { pathsFromEnv } from '../../../lua/package.ts';
import { LuaVm } from '../../../lua/vm.ts';
import type { LuaChunk } from '../../../lua/vm.ts';
import { pushValue } from '../../../lua/convert.ts';
import { LogLevel, mainErrorLog } from '../../../core/error-log.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { expandPackagePath } from './conf.ts';
import type { LuaHook, LuaMainConf } from './conf.ts';

/** What a hook's host functions act on: OpenResty's ngx_http_lua_ctx_t for one run. */
export interface HookContext {
  readonly runtime: LuaRuntime;
  /** Undefined in init_by_lua / init_worker_by_lua. */
  readonly r: HttpRequest | undefined;
  /** `content`, `rewrite`, `access`, `log`, `header_filter`, `body_filter`, `set`, `init_worker`. */
  readonly phase: string;
  /** ngx.exit's status (ngx.redirect's too). */
  exit?: number;
  /** ngx.exec's target. */
  exec?: { uri: string; args: string | undefined };
  /** ngx.eof was called: the body is complete. */
  eof?: boolean;
  /** Ends the hold ngx.eof put on the response's finish, once the hook is over. */
  releaseFinish?: () => void;
  /** Light threads of this hook that have not finished (the hook's end waits for them). They share
   * this context: ngx.exit in any of them is the request's. */
  threads?: Map<number, Promise<unknown>>;
  /** Ends the hook's coroutine and its light threads where they wait (ngx.exit/exec/redirect in any
   * of them, the hook failing): OpenResty's ngx_http_lua_finalize_threads. */
  signal?: KillSignal;
  /** The end of each light thread not yet waited for or killed, by id. */
  threadEnds?: Map<number, Promise<number>>;
  /** The ids of the hook's light threads (and its on_abort function), forgotten by ngx.lua when it ends. */
  threadIds?: number[];
  /** Subrequests (ngx.location.capture) being waited for: ngx.exit/exec/redirect are refused meanwhile. */
  noAbort?: number;
  /** A timer's `, client: …, server: …` log suffix. */
  origin?: string;
  /** ngx.req.set_uri(uri, true) ended the hook: location selection runs again. */
  jumped?: boolean;
  /** A timer's ngx.ctx table (made on first use, released when it ends). */
  ctxId?: number;
  /** ngx.arg: set_by_lua's arguments, body_filter_by_lua's chunk and end flag. */
  args?: Array<string | boolean | Buffer>;
}

export class LuaRuntime {
  readonly vm: LuaVm;
  readonly conf: LuaMainConf;
  readonly workerId: number;
  readonly workerCount: number;
  /** nginx's prefix (ngx.config.prefix()). */
  readonly prefix: string;
  private readonly chunks = new Map<LuaHook, LuaChunk | string>();
  private readonly fileHooks = new Map<LuaHook, Map<string, LuaHook>>();
  /** Hooks whose file could not be read (LuaJIT's LUA_ERRFILE): a request hook answers 404 for them. */
  private readonly unreadable = new WeakSet<LuaHook>();
  /** The Lua function that forgets a request's ngx.ctx tables (ngx.lua's first result). */
  private releaseCtx = 0;
  /** Drops the modules required since the VM was made (lua_code_cache off). */
  private moduleForgetter = 0;
  /** Requests whose Lua started with fresh modules (lua_code_cache off). */
  private readonly freshModules = new WeakSet<HttpRequest>();
  /** The Lua function that runs timer `id` (ngx.lua's second result). */
  private timerRunner = 0;
  /** The Lua function that runs light thread `id` (ngx.lua's third result). */
  private threadRunner = 0;
  /** The Lua function that forgets light threads by id (ngx.lua's fourth result). */
  private threadForgetter = 0;
  private nextCtxId = 1;
  /** How many coroutines OpenResty's thread cache would hold now (see newThread). */
  private cachedThreads = 0;

  private constructor(vm: LuaVm, conf: LuaMainConf, workerId: number, workerCount: number, prefix: string) {
    this.vm = vm;
    this.prefix = prefix;
    this.conf = conf;
    this.workerId = workerId;
    this.workerCount = workerCount;
  }

  /** A VM with the `ngx` table ngx.lua builds over `host(rt)`'s functions. */
  static async create(conf: LuaMainConf, workerId: number, workerCount: number, prefix: string,
    host: (rt: LuaRuntime) => Record<string, unknown>): Promise<LuaRuntime> {
    const vm = await LuaVm.create({ print: (line) => mainErrorLog().notice(`[lua] ${line}`) });
    const rt = new LuaRuntime(vm, conf, workerId, workerCount, prefix);
    // OpenResty's VM is made while nginx reads its configuration, before the `env` directive
    // clears the environment: LUA_PATH and LUA_CPATH count whatever `env` says
    const defaults = pathsFromEnv(process.env.LUA_PATH, process.env.LUA_CPATH);
    vm.setPackagePath(
      conf.packagePath === undefined ? defaults.path : expandPackagePath(conf.packagePath, defaults.path, prefix),
      conf.packageCpath === undefined ? defaults.cpath : expandPackagePath(conf.packageCpath, defaults.cpath, prefix));
    const { bridge } = vm;
    const { L } = bridge;
    bridge.load(L, fs.readFileSync(new URL('ngx.lua', import.meta.url)), 'ngx.lua');
    pushValue(bridge, L, host(rt));
    bridge.call(L, 1, 4);
    rt.threadForgetter = bridge.ref(L);
    rt.threadRunner = bridge.ref(L);
    rt.timerRunner = bridge.ref(L);
    rt.releaseCtx = bridge.ref(L);
    bridge.load(L, Buffer.from(FORGET_MODULES), '=forget modules');
    bridge.call(L, 0, 1);
    rt.moduleForgetter = bridge.ref(L);
    return rt;
  }

  /** The hook a file path with variables names for this request: one per path, so each is compiled once. */
  private fileHook(hook: LuaHook, r: HttpRequest): LuaHook {
    const file = path.resolve(this.prefix, hook.filePath!.evaluate(r));
    let byPath = this.fileHooks.get(hook);
    if (!byPath) this.fileHooks.set(hook, (byPath = new Map()));
    let found = byPath.get(file);
    if (!found) byPath.set(file, (found = { kind: hook.kind, source: undefined, file, name: file }));
    return found;
  }

  /**
   * OpenResty's Lua thread cache as its debug lines tell it: an entry thread (rewrite, access,
   * content), a light thread or a timer takes a cached coroutine when there is one (`lua reusing
   * cached lua thread`) and gives it back when it ends (`lua caching unused lua thread`, up to
   * lua_thread_cache_max_entries). Gatehouse's own coroutine pool (src/lua/coroutine.ts) also
   * serves the hooks OpenResty runs without a coroutine, so it keeps this count apart to say
   * what OpenResty would.
   */
  newThread(ctx: HookContext | undefined): void {
    if (this.cachedThreads === 0) return;
    this.cachedThreads--;
    logFor(ctx, LogLevel.debug, 'lua reusing cached lua thread');
  }

  /** The coroutine of newThread ended. */
  delThread(ctx: HookContext | undefined): void {
    if (this.cachedThreads >= (this.conf.threadCacheMax ?? 1024)) return;
    this.cachedThreads++;
    logFor(ctx, LogLevel.debug, 'lua caching unused lua thread');
  }

  /** The hook's compiled chunk, or the message it failed to compile with (logged by the caller). */
  chunk(hook: LuaHook): LuaChunk | string {
    let c = this.chunks.get(hook);
    if (c === undefined) {
      try {
        const code = hook.source ?? skipShebang(fs.readFileSync(hook.file!));
        c = this.vm.load(code, hook.name);
      } catch (e) {
        if (!(e instanceof LuaSyntaxError)) this.unreadable.add(hook);
        c = e instanceof LuaSyntaxError
          ? `failed to load ${hook.file ? `external Lua file "${hook.file}"` : 'inlined Lua code'}: ${luajitSyntaxMessage(e.message)}`
          : `failed to load external Lua file "${hook.file}": cannot open ${hook.file}${openFailure(e)}`;
      }
      if (this.conf.codeCache !== false || typeof c === 'string') this.chunks.set(hook, c);
    }
    return c;
  }

  /** Runs `hook` in a coroutine for `ctx`; a chunk that does not compile is a failed outcome. */
  run<R = undefined>(hook: LuaHook, ctx: HookContext, options?: RunOptions<R>): HookOutcome<R> | Promise<HookOutcome<R>> {
    // lua_code_cache off: OpenResty gives each request a VM of its own, so its `require`s load the files again
    if (this.conf.codeCache === false && ctx.r && !this.freshModules.has(ctx.r)) {
      this.freshModules.add(ctx.r);
      this.vm.bridge.pushRef(this.vm.bridge.L, this.moduleForgetter);
      this.vm.bridge.call(this.vm.bridge.L, 0, 0);
    }
    const used = hook.filePath && ctx.r ? this.fileHook(hook, ctx.r) : hook;
    const chunk = this.chunk(used);
    if (typeof chunk === 'string') return { ok: false, error: chunk, traceback: '', unreadable: this.unreadable.has(used) };
    return this.vm.run(chunk, ctx, options);
  }

  /** Runs timer `id`'s function in a coroutine (`last`: forget it after); with `refused`, ngx.lua logs that it could not run instead. */
  runTimer(id: number, premature: boolean, last: boolean, ctx: HookContext, refused?: string): LuaOutcome<undefined> | Promise<LuaOutcome<undefined>> {
    const { bridge } = this.vm;
    return this.vm.run(this.timerRunner as LuaChunk, ctx, {
      signal: ctx.signal,
      args: (L) => {
        bridge.pushInteger(L, id);
        bridge.pushBoolean(L, premature);
        bridge.pushBoolean(L, last);
        if (refused === undefined) return 3;
        bridge.pushString(L, refused);
        return 4;
      },
    });
  }

  /** Runs light thread `id` in a coroutine of its own, for the request of `ctx`; `signal` ends it where it waits. */
  runThread(id: number, ctx: HookContext, signal = ctx.signal): LuaOutcome<undefined> | Promise<LuaOutcome<undefined>> {
    const { bridge } = this.vm;
    return this.vm.run(this.threadRunner as LuaChunk, ctx, { args: (L) => (bridge.pushInteger(L, id), 1), signal });
  }

  /** The hook ended: ngx.lua lets go of its light threads (functions, arguments, results never waited for). */
  forgetThreads(ctx: HookContext): void {
    const all = ctx.threadIds;
    if (!all) return;
    // the threads waited for or killed are gone already; the on_abort function's id is negative
    const ends = ctx.threadEnds;
    const ids = all.filter((id) => id < 0 || ends?.has(id));
    ctx.threadIds = undefined;
    ctx.threadEnds = undefined;
    const { bridge } = this.vm;
    const { L } = bridge;
    for (let i = 0; i < ids.length; i += FORGET_BATCH) {
      const batch = ids.slice(i, i + FORGET_BATCH);
      bridge.api.lua_checkstack(L, batch.length + 1);
      bridge.pushRef(L, this.threadForgetter);
      for (const id of batch) bridge.pushInteger(L, id);
      bridge.call(L, batch.length, 0);
    }
  }

  /** Logs a failed hook as OpenResty does (`lua entry thread aborted: runtime error: …`). */
  logFailure(ctx: HookContext, outcome: { error: string; traceback: string }): void {
    const text = outcome.traceback ? abortedMessage(outcome) : outcome.error;
    logFor(ctx, LogLevel.error, text);
  }

  /** The id behind a request's current ngx.ctx (a new one after an internal redirect). */
  ctxId(r: HttpRequest): number {
    let id = r.ctx.get(CTX_ID) as number | undefined;
    if (id === undefined) {
      id = this.nextCtxId++;
      r.ctx.set(CTX_ID, id);
      let ids = ctxIds.get(r);
      if (!ids) ctxIds.set(r, (ids = []));
      ids.push(id);
    }
    return id;
  }

  /** init_worker_by_lua's own ngx.ctx (it runs once per worker: its table is kept). */
  workerCtxId(): number {
    return (this.initWorkerCtx ??= this.nextCtxId++);
  }

  private initWorkerCtx: number | undefined;

  /** A timer's own ngx.ctx (one per run, as OpenResty's fake request has). */
  ownCtxId(ctx: HookContext): number {
    return (ctx.ctxId ??= this.nextCtxId++);
  }

  /** The timer ended: its ngx.ctx table can go. */
  releaseOwnCtx(ctx: HookContext): void {
    if (ctx.ctxId === undefined) return;
    mainErrorLog().debug(`lua release ngx.ctx at ref ${ctx.ctxId}`);
    this.releaseId(ctx.ctxId);
    ctx.ctxId = undefined;
  }

  private releaseId(id: number): void {
    const { bridge } = this.vm;
    const { L } = bridge;
    bridge.pushRef(L, this.releaseCtx);
    bridge.pushInteger(L, id);
    bridge.call(L, 1, 0);
  }

  /** ngx.req.set_uri(uri, true) jumped: the request gets a new ngx.ctx, as OpenResty starts its Lua context again. */
  newCtx(r: HttpRequest): void {
    r.ctx.delete(CTX_ID);
  }

  /** The request is done: its ngx.ctx tables can go. */
  release(r: HttpRequest): void {
    const ids = ctxIds.get(r);
    if (!ids) return;
    ctxIds.delete(r);
    for (const id of ids) {
      requestLog(r).debug(`lua release ngx.ctx at ref ${id}`);
      this.releaseId(id);
    }
  }

  close(): void {
    this.vm.close();
  }
}

/** How many thread ids go to ngx.lua's forgetter in one call (each is a stack slot). */
const FORGET_BATCH = 32;

/** A hook's end; `unreadable` when its file could not be read (a request hook then answers 404, as OpenResty does). */
export type HookOutcome<R> = LuaOutcome<R> | { readonly ok: false; readonly error: string; readonly traceback: string; readonly unreadable: boolean };

/** What LuaJIT's loader adds after "cannot open FILE": the C library's words for the errno. */
function openFailure(e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code;
  const words: Record<string, string> = {
    ENOENT: 'No such file or directory', EACCES: 'Permission denied', EISDIR: 'Is a directory', ENOTDIR: 'Not a directory',
  };
  return code && words[code] ? `: ${words[code]}` : '';
}

/** nginx's "while …" for a hook's lines: the phase's, or the main request's after ngx.eof (its last buffer went to the writer). */
function logAction(ctx: HookContext): string | undefined {
  if (ctx.phase === 'log') return 'logging request';
  if (ctx.phase === 'balancer') return 'connecting to upstream';
  return ctx.eof && !ctx.r!.parent ? 'sending to client' : undefined;
}

/** Logs for the hook's request (with nginx's context), or for a timer (`context: ngx.timer`), or the main log. */
export function logFor(ctx: HookContext | undefined, level: number, text: string): void {
  if (ctx?.r) requestLog(ctx.r, logAction(ctx)).log(level, text);
  else if (ctx?.phase === 'timer') mainErrorLog().log(level, `${text}, context: ngx.timer${ctx.origin ?? ''}`);
  else if (ctx?.phase === 'init_worker') mainErrorLog().log(level, `${text}, context: init_worker_by_lua*`);
  else mainErrorLog().log(level, text);
}

const CTX_ID = {};
const ctxIds = new WeakMap<HttpRequest, number[]>();

/**
 * ngx.exit, ngx.exec, ngx.redirect, a jumping ngx.req.set_uri: the request's Lua ends here, its other
 * coroutines where they wait (the caller unwinds itself). `status` is refused (`attempt to abort with
 * pending subrequests`) while subrequests are waited for, unless it only closes the connection.
 */
export function endRequestLua(ctx: HookContext, status: number | undefined, level: number): void {
  if (ctx.noAbort && (status === undefined || !CLOSING.has(status))) {
    throw new LuaError('attempt to abort with pending subrequests', level);
  }
  ctx.signal?.kill();
}

/** What ends a request by closing its connection: NGX_ERROR, 408, 444, 499. */
export const CLOSING = new Set([-1, 408, 444, 499]);

/**
 * The running hook's context, or OpenResty's error for code outside any request. With `refused`, a
 * C function of ngx_http_lua_module checks its context first (ngx_http_lua_check_context: `API disabled
 * in the context of ngx.timer` where 'timer' is listed); without, it is one of resty.core's, whose C
 * side refuses a timer's fake request as `API disabled in the current context`.
 */
export function requestContext(rt: LuaRuntime, level = 1, refused?: readonly string[]): HookContext & { r: HttpRequest } {
  const ctx = currentContext(rt);
  if (ctx && refused) refuseIn(ctx, refused, level);
  if (!ctx?.r) {
    const where = !ctx ? 'context of init_by_lua*' : ctx.phase === 'timer' ? 'current context' : `context of ${phaseName(ctx.phase)}`;
    throw new LuaError(`API disabled in the ${where}`, level);
  }
  return ctx as HookContext & { r: HttpRequest };
}

/** Where most of ngx_http_lua_module's C functions (output, ngx.exec, ngx.req.read_body, …) are refused. */
export const C_REFUSED: readonly string[] = ['set', 'log', 'header_filter', 'body_filter', 'timer'];

/** Phases where a function is not allowed, as OpenResty's ngx_http_lua_check_context refuses them. */
export function refuseIn(ctx: HookContext, phases: readonly string[], level = 1): void {
  // balancer_by_lua cannot wait nor answer: refused wherever set_by_lua is
  // exit_worker_by_lua cannot wait either: refused wherever init_worker_by_lua is
  const as = ctx.phase === 'balancer' ? 'set' : ctx.phase === 'exit_worker' ? 'init_worker' : ctx.phase;
  if (phases.includes(as)) throw new LuaError(`API disabled in the context of ${phaseName(ctx.phase)}`, level);
}

/** How OpenResty names a phase in "API disabled in the context of …". */
function phaseName(phase: string): string {
  return phase === 'timer' ? 'ngx.timer' : `${phase}_by_lua*`;
}

/** The hook context of the Lua code running now (inside a host function). */
export function currentContext(rt: LuaRuntime): HookContext | undefined {
  return rt.vm.running?.context as HookContext | undefined;
}

/** Made once the VM is set up: forgets every module `require`d after that (what a new VM would not have). */
const FORGET_MODULES = `local loaded, builtin = package.loaded, {}
for k in pairs(loaded) do builtin[k] = true end
return function() for k in pairs(loaded) do if not builtin[k] then loaded[k] = nil end end end`;

/** A file's first line starting with `#` is dropped, its newline kept (as luaL_loadfile does), so `#!/bin/lua` loads. */
function skipShebang(code: Buffer): Buffer {
  if (code[0] !== 0x23) return code;
  const nl = code.indexOf(0x0a);
  return nl < 0 ? Buffer.alloc(0) : code.subarray(nl);
}

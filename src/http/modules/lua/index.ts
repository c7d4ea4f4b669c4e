/**
 * ngx_http_lua_module (OpenResty's lua-nginx-module): the `*_by_lua`,
 * `*_by_lua_block` and `*_by_lua_file` hooks, `set_by_lua*`, the init hooks,
 * `lua_package_path`/`cpath`, `lua_code_cache` and `lua_shared_dict`. The
 * VM is one per worker (src/lua), created when the configuration uses Lua;
 * `load_module` lines naming this module or ndk_http_module are accepted as
 * built in (src/core/modules/core.ts). What differs from OpenResty is listed
 * in docs/lua.md.
 */
import { Ctx } from '../../../conf/directive.ts';
import type { ConfContext } from '../../../conf/context.ts';
import type { Directive } from '../../../conf/directive.ts';
import type { ConfNode } from '../../../conf/parser.ts';
import { ConfError } from '../../../conf/errors.ts';
import { flagArg, parseSize } from '../../../conf/values.ts';
import { compileComplex } from '../../../core/variables.ts';
import { coreSettings } from '../../../core/modules/core.ts';
import { httpConf, httpMainOf } from '../../http-conf.ts';
import type { HttpMainConf, HttpModule, LocationConf } from '../../http-conf.ts';
import type { BodyFilterEntry } from '../../body-filter.ts';
import { program, setTarget } from '../rewrite.ts';
import { NEXT } from '../rewrite/program.ts';
import { luaLoc, readHook } from './conf.ts';
import type { LuaMainConf } from './conf.ts';
import { luaBodyFilter, luaHeaderFilter } from './filters.ts';
import { accessHandler, contentHandler, logHandler, rewriteHandler, runSetHook, setRuntime } from './hooks.ts';
import { LuaRuntime } from './runtime.ts';
import { useLuaBalancer } from './balancer.ts';
import { upstreamGroupOf } from '../../upstream/module.ts';
import { dictZones } from './api-shared.ts';
import { hostLibrary } from './api.ts';
import { LuaTimers } from './api-timer.ts';
import type { HookContext } from './runtime.ts';
import { socketDirectives } from './socket-conf.ts';
import { closeIdle } from './socket-pool.ts';
import type { LuaProcessHost } from './api-resty-core.ts';

const mains = new WeakMap<HttpMainConf, LuaMainConf>();

function luaMainOf(cf: ConfContext): LuaMainConf {
  const http = httpMainOf(cf);
  let conf = mains.get(http);
  if (!conf) mains.set(http, (conf = { sharedDicts: new Map(), used: false }));
  conf.used = true;
  // ngx.req.raw_header may be called from any hook
  http.keepRawHeads = true;
  return conf;
}

const IN_LOCATION = Ctx.HTTP | Ctx.SERVER | Ctx.LOCATION | Ctx.LIF;

/** `NAME`, `NAME_block` and `NAME_file`, each with `handler`. */
function family(name: string, contexts: number, args: Directive['args'], handler: Directive['handler']): Directive[] {
  return ['', '_block', '_file'].map((suffix) => ({ name: name + suffix, contexts, args, handler }));
}

/** An on|off at any level of the location tree. */
function locFlag(name: string, field: 'needBody' | 'transformUnderscores' | 'useDefaultType' | 'checkClientAbort' | 'http10Buffering'): Directive[] {
  return [{
    name, contexts: IN_LOCATION, args: 'flag',
    handler(cf, node) {
      luaMainOf(cf);
      const conf = cf.get(luaLoc);
      if (conf[field] !== undefined) return 'is duplicate';
      conf[field] = flagArg(cf, node.args[0]);
    },
  }];
}

/** A one-argument http-level setting. */
function mainSetting(name: string, set: (conf: LuaMainConf, cf: ConfContext, value: string) => void): Directive {
  return { name, contexts: Ctx.HTTP, args: 1, handler(cf, node) { set(luaMainOf(cf), cf, node.args[0]); } };
}

function count(cf: ConfContext, v: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n)) throw cf.invalid(v);
  return n;
}

function duplicate(cf: ConfContext, have: unknown): void {
  if (have !== undefined) throw cf.error('is duplicate');
}

/** A hook stored at this level of the location tree. */
function locHook(field: 'rewrite' | 'access' | 'log' | 'headerFilter' | 'bodyFilter') {
  return (cf: ConfContext, node: ConfNode): void | string => {
    luaMainOf(cf);
    const conf = cf.get(luaLoc);
    if (conf[field] !== undefined) return 'is duplicate';
    conf[field] = readHook(cf, node);
  };
}

function readContent(cf: ConfContext, node: ConfNode): void | string {
  luaMainOf(cf);
  const conf = cf.get(luaLoc);
  if (conf.content !== undefined) return 'is duplicate';
  conf.content = readHook(cf, node);
  (cf.data.location as LocationConf).contentHandler = contentHandler(conf.content);
}

/** set_by_lua $var <code> [args...] (args are complex values), _block $var { code }, _file $var file [args...]. */
function readSetByLua(cf: ConfContext, node: ConfNode): void | string {
  luaMainOf(cf);
  const vars = httpMainOf(cf).variables;
  const index = setTarget(cf, node.args[0]);
  const hook = readHook(cf, node, 1);
  const args = node.luaBlock ? [] : node.args.slice(2).map((a) => compileComplex(cf, vars, a));
  program(cf).push((r) => {
    const value = runSetHook(r, hook, args.map((cv) => cv.evaluate(r)));
    if (value === undefined) return 500;
    vars.assign(r, index, value);
    return NEXT;
  });
}

function initHook(field: 'init' | 'initWorker' | 'exitWorker') {
  return (cf: ConfContext, node: ConfNode): void | string => {
    const conf = luaMainOf(cf);
    if (conf[field] !== undefined) return 'is duplicate';
    conf[field] = readHook(cf, node);
  };
}

/** init_by_lua on the worker's fresh VM (OpenResty runs it once in the master; each worker has its own VM here). */
function runInit(rt: LuaRuntime, conf: LuaMainConf): void {
  const hook = conf.init;
  if (!hook) return;
  // OpenResty logs these at [error] (and nginx does not start)
  const what = hook.file === undefined ? 'init_by_lua error' : 'init_by_lua_file error';
  const chunk = rt.chunk(hook);
  if (typeof chunk === 'string') {
    throw new ConfError(`${what}: ${chunk.replace(/^failed to load (inlined Lua code|external Lua file "[^"]*"): /, '')}`, undefined, undefined, 'error');
  }
  const { bridge } = rt.vm;
  bridge.pushRef(bridge.L, chunk);
  try {
    bridge.call(bridge.L, 0, 0);
  } catch (e) {
    throw new ConfError(`${what}: ${(e as Error).message}`, undefined, undefined, 'error');
  }
}

async function runInitWorker(rt: LuaRuntime, conf: LuaMainConf): Promise<void> {
  const hook = conf.initWorker;
  if (!hook) return;
  const ctx: HookContext = { runtime: rt, r: undefined, phase: 'init_worker' };
  const outcome = await rt.run(hook, ctx);
  if (!outcome.ok && ctx.exit === undefined) rt.logFailure(ctx, outcome);
}

/** exit_worker_by_lua as the worker's configuration is let go (it cannot wait, as in OpenResty). */
function runExitWorker(rt: LuaRuntime, conf: LuaMainConf): void {
  const hook = conf.exitWorker;
  if (!hook) return;
  const ctx: HookContext = { runtime: rt, r: undefined, phase: 'exit_worker' };
  const outcome = rt.run(hook, ctx);
  if (!(outcome instanceof Promise) && !outcome.ok && ctx.exit === undefined) rt.logFailure(ctx, outcome);
}

export const luaModule: HttpModule = {
  name: 'ngx_http_lua_module',
  directives: [
    ...family('content_by_lua', Ctx.LOCATION | Ctx.LIF, 1, readContent),
    ...family('rewrite_by_lua', IN_LOCATION, 1, locHook('rewrite')),
    ...family('access_by_lua', IN_LOCATION, 1, locHook('access')),
    ...family('log_by_lua', IN_LOCATION, 1, locHook('log')),
    ...family('header_filter_by_lua', IN_LOCATION, 1, locHook('headerFilter')),
    ...family('body_filter_by_lua', IN_LOCATION, 1, locHook('bodyFilter')),
    ...family('set_by_lua', Ctx.SERVER | Ctx.SIF | Ctx.LOCATION | Ctx.LIF, [2, Infinity], readSetByLua),
    // OpenResty has only the _block and _file forms of this one
    ...family('balancer_by_lua', Ctx.UPSTREAM, 1, (cf, node) => {
      luaMainOf(cf);
      useLuaBalancer(upstreamGroupOf(cf), readHook(cf, node));
    }).filter((d) => d.name !== 'balancer_by_lua'),
    ...family('init_by_lua', Ctx.HTTP, 1, initHook('init')),
    ...family('init_worker_by_lua', Ctx.HTTP, 1, initHook('initWorker')),
    ...family('exit_worker_by_lua', Ctx.HTTP, 1, initHook('exitWorker')),
    {
      name: 'lua_package_path', contexts: Ctx.HTTP, args: 1,
      handler(cf, node) {
        const conf = luaMainOf(cf);
        duplicate(cf, conf.packagePath);
        conf.packagePath = node.args[0];
      },
    },
    {
      name: 'lua_package_cpath', contexts: Ctx.HTTP, args: 1,
      handler(cf, node) {
        const conf = luaMainOf(cf);
        duplicate(cf, conf.packageCpath);
        conf.packageCpath = node.args[0];
      },
    },
    {
      name: 'lua_code_cache', contexts: IN_LOCATION, args: 'flag',
      handler(cf, node) {
        luaMainOf(cf).codeCache = flagArg(cf, node.args[0]);
        if (!luaMainOf(cf).codeCache) cf.warn('lua_code_cache is off; this will hurt performance', true, 'alert');
      },
    },
    ...locFlag('lua_need_request_body', 'needBody'),
    ...locFlag('lua_transform_underscores_in_response_headers', 'transformUnderscores'),
    ...locFlag('lua_use_default_type', 'useDefaultType'),
    ...locFlag('lua_http10_buffering', 'http10Buffering'),
    ...locFlag('lua_check_client_abort', 'checkClientAbort'),
    mainSetting('lua_max_pending_timers', (conf, cf, v) => { conf.maxPendingTimers = count(cf, v); }),
    mainSetting('lua_max_running_timers', (conf, cf, v) => { conf.maxRunningTimers = count(cf, v); }),
    mainSetting('lua_thread_cache_max_entries', (conf, cf, v) => { conf.threadCacheMax = count(cf, v); }),
    mainSetting('rewrite_by_lua_no_postpone', (conf, cf, v) => { conf.rewriteNoPostpone = flagArg(cf, v); }),
    mainSetting('access_by_lua_no_postpone', (conf, cf, v) => { conf.accessNoPostpone = flagArg(cf, v); }),
    ...socketDirectives(luaMainOf),
    // accepted: regex limits are not there yet (docs/lua.md)
    ...['lua_socket_send_lowat', 'lua_regex_cache_max_entries', 'lua_regex_match_limit']
      .map((name): Directive => ({ name, contexts: IN_LOCATION, args: 1, handler(cf) { luaMainOf(cf); } })),
    {
      name: 'lua_shared_dict', contexts: Ctx.HTTP, args: 2,
      handler(cf, node) {
        const [name, sizeArg] = node.args;
        const size = parseSize(sizeArg);
        if (Number.isNaN(size)) throw cf.error(`invalid lua shared dict size "${sizeArg}"`);
        if (size < 8192) throw cf.error(`too small lua shared dict size "${sizeArg}"`);
        const conf = luaMainOf(cf);
        if (conf.sharedDicts.has(name)) throw cf.error(`lua_shared_dict "${name}" is already defined as "${name}"`);
        conf.sharedDicts.set(name, size);
        // made now, so the master hands the same memory to every worker
        dictZones(name, size);
      },
    },
  ],
  postconfiguration(http) {
    if (!mains.get(http)?.used) return;
    // OpenResty postpones rewrite_by_lua and access_by_lua to the end of their phases; with
    // *_no_postpone they run where a dynamic module's handlers run, first
    const conf = mains.get(http)!;
    http.addPhaseHandler('REWRITE', conf.rewriteNoPostpone ? 50 : 1000, rewriteHandler);
    http.addPhaseHandler('ACCESS', conf.accessNoPostpone ? 50 : 1000, accessHandler);
    // OpenResty moves its log handler to the front of the log phase
    http.addPhaseHandler('LOG', 50, logHandler);
    // a dynamic module's filters come first in nginx's chains
    const body: BodyFilterEntry = http.addBodyFilter(50, (r, chunk, eof) => luaBodyFilter(r, chunk, eof, body));
    // header_filter_by_lua and body_filter_by_lua run for subrequests too (no r != r->main check)
    http.addHeaderFilter(50, (r) => luaHeaderFilter(r, body), { subrequests: true });
  },
  async initWorker(cycle, worker) {
    const http = httpConf(cycle);
    const conf = http && mains.get(http);
    if (!http || !conf?.used) return;
    let timers: LuaTimers | undefined;
    const core = coreSettings(cycle);
    const proc: LuaProcessHost = {
      role: worker.role, masterProcess: core.masterProcess,
      requestPrivilegedAgent: () => worker.requestPrivilegedAgent(), exitGracefully: () => worker.exitGracefully(),
    };
    const rt = await LuaRuntime.create(conf, worker.workerId, core.workerProcesses, cycle.paths.prefix,
      (runtime) => hostLibrary(runtime, (timers = new LuaTimers(runtime)), proc));
    setRuntime(http, rt);
    worker.onShutdown((graceful) => {
      const ended = timers!.expire();
      if (graceful) worker.holdShutdown(ended);
    });
    worker.onClose(() => {
      runExitWorker(rt, conf);
      closeIdle();
      rt.close();
    });
    // an init_by_lua error stops the configuration loading (the master reports it, as nginx does)
    runInit(rt, conf);
    await runInitWorker(rt, conf);
  },
};

/**
 * The gateway's serverless functions on the worker's Lua (the seam of
 * src/gateway/plugins/serverless.ts): one LuaRuntime with the `ngx` table,
 * the one `*_by_lua` hooks get, made when a gateway request or an Admin API
 * check first needs it. Each call runs in a coroutine as a hook does
 * (runtime.run → the VM's coroutine runner), in OpenResty's phase for
 * APISIX's (rewrite, access and before_proxy run in access_by_lua), and its
 * end is read as the hooks read theirs (afterHook): `ngx.exit`, output
 * written with `ngx.say`, a Lua error (500).
 */
import fs from 'node:fs';
import type { HostFunction } from '../../../lua/bridge.ts';
import { pushValue, toValue } from '../../../lua/convert.ts';
import type { LuaChunk } from '../../../lua/vm.ts';
import type { BodyChunk, PhaseResult, PluginContext } from '../../../gateway/plugins/phase-api.ts';
import type { LuaFunctions, ServerlessConf } from '../../../gateway/plugins/serverless.ts';
import type { RequestContext } from '../../../gateway/dataplane/request-context.ts';
import { DECLINED, OK } from '../../http-conf.ts';
import type { HttpRequest } from '../../request.ts';
import { hostLibrary } from './api.ts';
import { LuaTimers } from './api-timer.ts';
import { afterHook } from './hooks.ts';
import { headStarted } from './output.ts';
import { currentContext, logFor, LuaRuntime } from './runtime.ts';
import { LogLevel } from '../../../core/error-log.ts';
import type { HookContext } from './runtime.ts';
import { closeSocketsOf, mainRequest } from './socket-lifetime.ts';

interface GatewayHookContext extends HookContext { readonly gateway: RequestContext }

/** OpenResty's phase for each of APISIX's. */
const HOOK_PHASE: Record<ServerlessConf['phase'], string> = {
  rewrite: 'access', access: 'access', before_proxy: 'access', header_filter: 'header_filter', body_filter: 'body_filter', log: 'log',
};

/**
 * A compile error as LuaJIT words it: Lua 5.4's one "syntax error" (an
 * expression that is not a call, where an assignment was due) is LuaJIT's
 * `'=' expected`, and LuaJIT quotes the end of input.
 */
function luajitSyntax(message: string): string {
  return message.replace(/: syntax error near (.*)$/, ": '=' expected near $1").replace(/near <eof>$/, "near '<eof>'");
}

/** check(source) → error or nil; run(source) → whether the route matches (compiled once per source), and a runtime error. */
const FILTER_LUA = `
local host = ...
local compiled = {}
local vars = setmetatable({}, { __index = function(_, k) return host.read(tostring(k)) end })
local function compile(source)
  local chunk, err = load('return ' .. source)
  if not chunk then return nil, "failed to load 'filter_func' string: " .. err end
  local ok, fn = pcall(chunk)
  if not ok or type(fn) ~= 'function' then return nil, "'filter_func' should be a function" end
  return fn
end
local function check(source)
  local _, err = compile(source)
  return err
end
local function run(source)
  local fn = compiled[source]
  if fn == nil then
    fn = compile(source) or false
    compiled[source] = fn
  end
  if not fn then return false end
  local ok, res = pcall(fn, vars)
  if not ok then return false, tostring(res) end
  return res and true or false, nil
end
return check, run
`;

export interface GatewayLua extends LuaFunctions {
  /** The request is over: its ngx.ctx (api_ctx) and cosockets go. */
  release(r: HttpRequest): void;
  close(): void;
}

export interface GatewayLuaOptions {
  workerId: number;
  workerCount: number;
  prefix: string;
  /** Called when the worker stops serving: pending timers run premature. */
  onShutdown(fn: (graceful: boolean) => void): void;
  /** A graceful stop waits for the timers still running. */
  holdShutdown(work: Promise<unknown>): void;
}

export async function createGatewayLua(opts: GatewayLuaOptions): Promise<GatewayLua> {
  let timers: LuaTimers | undefined;
  const rt = await LuaRuntime.create({ sharedDicts: new Map(), used: true }, opts.workerId, opts.workerCount, opts.prefix,
    (runtime) => hostLibrary(runtime, (timers = new LuaTimers(runtime))));
  opts.onShutdown((graceful) => {
    const ended = timers!.expire();
    if (graceful) opts.holdShutdown(ended);
  });
  const { vm } = rt;
  const { bridge } = vm;
  const { L } = bridge;

  const gatewayOf = (): RequestContext => (currentContext(rt) as GatewayHookContext).gateway;
  const host: Record<string, HostFunction> = {
    route_info: (L1) => {
      const g = gatewayOf();
      const route = g.route;
      for (const v of [g.matchedUri, g.matchedHost, route?.id, route?.conf.service_id, g.consumer?.username]) {
        if (v === undefined || v === '') bridge.pushNil(L1);
        else bridge.pushString(L1, String(v));
      }
      return 5;
    },
    // the upstream's parts are the gateway's, not nginx variables
    var_get: (L1) => {
      const g = gatewayOf();
      const name = bridge.toString(L1, 1);
      const value = name === 'upstream_uri' ? g.upstreamUri : name === 'upstream_host' ? g.upstreamHost
        : name === 'upstream_scheme' ? g.upstreamScheme : undefined;
      if (value === undefined) return 0;
      bridge.pushString(L1, value);
      bridge.pushBoolean(L1, true);
      return 2;
    },
    var_set: (L1) => {
      const g = gatewayOf();
      const name = bridge.toString(L1, 1);
      const value = bridge.toString(L1, 2);
      if (name === 'upstream_uri' && value !== undefined) g.upstreamUri = value;
      else if (name === 'upstream_host') g.upstreamHost = value;
      else if (name === 'upstream_scheme' && value !== undefined) g.upstreamScheme = value;
      else return 0;
      bridge.pushBoolean(L1, true);
      return 1;
    },
  };
  bridge.load(L, fs.readFileSync(new URL('serverless.lua', import.meta.url)), 'serverless.lua');
  pushValue(bridge, L, host);
  bridge.call(L, 1, 3);
  const runner = bridge.ref(L) as LuaChunk;
  const compiler = bridge.ref(L);
  const checker = bridge.ref(L);

  // filter_func: `return <source>` compiled as APISIX's loadstring, called with a table reading the request's variables
  let filterRead: ((name: string) => string | undefined) | undefined;
  bridge.load(L, Buffer.from(FILTER_LUA), '=filter_func');
  pushValue(bridge, L, { read: ((L1) => {
    const v = filterRead?.(bridge.toString(L1, 1) ?? '');
    if (v === undefined) return 0;
    bridge.pushString(L1, v);
    return 1;
  }) as HostFunction });
  bridge.call(L, 1, 2);
  const filterRunner = bridge.ref(L);
  const filterChecker = bridge.ref(L);

  /** Pushes the sources as a Lua array of byte strings (UTF-8, as they came in JSON). */
  const pushSources = (sources: string[]) => {
    bridge.api.lua_createtable(L, sources.length, 0);
    sources.forEach((s, i) => {
      bridge.pushBytes(L, Buffer.from(s));
      bridge.api.lua_rawseti(L, -2, BigInt(i + 1));
    });
  };

  // each conf's functions compiled once per worker (APISIX's lrucache per plugin conf), and its conf table
  const compiled = new WeakMap<ServerlessConf, { funcs: number; conf: number }>();
  const forget = new FinalizationRegistry<{ funcs: number; conf: number }>((refs) => {
    bridge.unref(refs.funcs);
    bridge.unref(refs.conf);
  });
  const refsOf = (conf: ServerlessConf) => {
    let refs = compiled.get(conf);
    if (!refs) {
      bridge.pushRef(L, compiler);
      pushSources(conf.functions);
      bridge.call(L, 1, 1);
      const funcs = bridge.ref(L);
      pushValue(bridge, L, conf);
      refs = { funcs, conf: bridge.ref(L) };
      compiled.set(conf, refs);
      forget.register(conf, refs);
    }
    return refs;
  };

  const start = (conf: ServerlessConf, g: RequestContext, args?: GatewayHookContext['args']) => {
    const refs = refsOf(conf);
    const ctx: GatewayHookContext = { runtime: rt, r: g.r, phase: HOOK_PHASE[conf.phase], gateway: g, args };
    const outcome = vm.run(runner, ctx, {
      args: (L1) => (bridge.pushRef(L1, refs.funcs), bridge.pushRef(L1, refs.conf), 2),
      results: (L1, n) => (n === 0 ? undefined : { code: toValue(bridge, L1, -n), body: n > 1 ? toValue(bridge, L1, -n + 1) : undefined }),
    });
    return { ctx, outcome };
  };

  type Outcome = Awaited<ReturnType<typeof start>['outcome']>;
  /** How a rewrite/access/before_proxy run ended: on with the request, an answer, or the engine's end. */
  const ending = (ctx: GatewayHookContext, outcome: Outcome): PhaseResult | Promise<PhaseResult> => {
    const r = ctx.r!;
    if (outcome.ok && ctx.exit === undefined && !headStarted(r) && outcome.value) {
      const { code, body } = outcome.value as { code: unknown; body: unknown };
      if (typeof code === 'number') return { status: code, body: body === undefined || body === null ? undefined : body };
    }
    const code = afterHook(ctx, outcome as never);
    const asResult = (c: number): PhaseResult => (c === DECLINED || c === OK ? undefined : { status: c > 0 ? c : r.status, engineCode: c });
    return code instanceof Promise ? code.then(asResult) : asResult(code);
  };

  /** Runs a checker (Lua: source → error message or nil): the error in LuaJIT's words, or undefined. */
  const compileError = (ref: number, source: string): string | undefined => {
    bridge.pushRef(L, ref);
    bridge.pushBytes(L, Buffer.from(source));
    bridge.call(L, 1, 1);
    const err = bridge.toString(L, -1);
    bridge.api.lua_settop(L, -2);
    return err ? luajitSyntax(err) : undefined;
  };

  return {
    check: (source) => compileError(checker, source),
    run(conf: ServerlessConf, pctx: PluginContext) {
      const g = pctx as RequestContext;
      const { ctx, outcome } = start(conf, g);
      if (ctx.phase === 'access') return outcome instanceof Promise ? outcome.then((o) => ending(ctx, o)) : ending(ctx, outcome);
      if (outcome instanceof Promise) {
        // OpenResty forbids waiting in the filters; the log phase may (its end is not awaited)
        if (ctx.phase !== 'log') rt.logFailure(ctx, { error: 'attempt to yield across C-call boundary', traceback: '' });
        void outcome.then((o) => { if (!o.ok && ctx.exit === undefined) rt.logFailure(ctx, o); });
        return undefined;
      }
      if (!outcome.ok && ctx.exit === undefined) rt.logFailure(ctx, outcome);
      // ngx.status in a header filter is the response's status from here on
      if (ctx.phase === 'header_filter') g.status = g.r.status;
      return undefined;
    },
    filterBody(conf: ServerlessConf, pctx: PluginContext, piece: BodyChunk): BodyChunk {
      const g = pctx as RequestContext;
      const { ctx, outcome } = start(conf, g, [piece.chunk, piece.eof]);
      if (outcome instanceof Promise) {
        rt.logFailure(ctx, { error: 'attempt to yield across C-call boundary', traceback: '' });
        return piece;
      }
      if (!outcome.ok && ctx.exit === undefined) {
        rt.logFailure(ctx, outcome);
        return piece;
      }
      const data = ctx.args![0];
      return { chunk: typeof data === 'string' ? Buffer.from(data, 'latin1') : data as Buffer, eof: ctx.args![1] === true };
    },
    checkFilter: (source) => compileError(filterChecker, source),
    filter(source, read, request) {
      filterRead = read;
      try {
        bridge.pushRef(L, filterRunner);
        bridge.pushBytes(L, Buffer.from(source));
        bridge.call(L, 1, 2);
        const ok = bridge.api.lua_toboolean(L, -2);
        const err = bridge.toString(L, -1);
        bridge.api.lua_settop(L, -3);
        // APISIX's radixtree raises it (a 500); here the route does not match and the error log says why
        if (err) logFor(request ? { runtime: rt, r: request as HttpRequest, phase: 'access' } : undefined, LogLevel.error, `failed to run filter_func: ${err}`);
        return Boolean(ok);
      } finally {
        filterRead = undefined;
      }
    },
    release(r: HttpRequest) {
      closeSocketsOf(mainRequest(r));
      rt.release(r);
    },
    close() {
      rt.close();
    },
  };
}

/**
 * The request hooks of ngx_http_lua_module: rewrite_by_lua, access_by_lua
 * and content_by_lua as phase handlers, log_by_lua, and set_by_lua as a
 * step of the rewrite module's program. Each run is a coroutine on the
 * worker's VM; a hook that waits makes its phase handler a promise.
 */
import { DECLINED, DONE, OK } from '../../http-conf.ts';
import type { HandlerResult, HttpMainConf } from '../../http-conf.ts';
import { internalRedirect, namedLocation } from '../../phases.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { readRequestBody, requestBodyOf } from '../../request-body.ts';
import { dropOutput, finishOutput, headStarted } from './output.ts';
import { luaLoc } from './conf.ts';
import type { LuaHook } from './conf.ts';
import { CLOSING, logFor } from './runtime.ts';
import { LogLevel } from '../../../core/error-log.ts';
import type { HookContext, HookOutcome, LuaRuntime } from './runtime.ts';
import { KillSignal } from '../../../lua/coroutine.ts';
import { watchClientAbort } from './api-abort.ts';
import { closeSocketsOf, mainRequest } from './socket-lifetime.ts';

const runtimes = new WeakMap<HttpMainConf, LuaRuntime>();

export function setRuntime(http: HttpMainConf, rt: LuaRuntime): void {
  runtimes.set(http, rt);
}

export function runtimeOf(r: HttpRequest): LuaRuntime {
  return runtimes.get(r.main)!;
}

/** Ends the response the hook wrote (ngx_http_lua_send_chain_link with last_buf). */
function finishResponse(ctx: HookContext): HandlerResult | Promise<HandlerResult> {
  if (ctx.eof) return DONE;
  ctx.eof = true;
  const wait = finishOutput(ctx.r!);
  return wait ? wait.then(() => DONE) : DONE;
}

/** What a rewrite, access or content hook's end means for the phase (ngx_http_lua_handle_exit and friends). */
export function afterHook(ctx: HookContext, outcome: HookOutcome<undefined>): HandlerResult | Promise<HandlerResult> {
  const r = ctx.r!;
  ctx.runtime.forgetThreads(ctx);
  if (!outcome.ok && ctx.exit === undefined && !ctx.jumped) {
    ctx.runtime.logFailure(ctx, outcome);
    if (!headStarted(r)) return 'unreadable' in outcome && outcome.unreadable ? 404 : 500;
    // output started: the connection is closed, what was held never goes out (nginx's NGX_ERROR)
    dropOutput(r);
    return DONE;
  }
  if (ctx.exec) {
    const { uri, args } = ctx.exec;
    return uri.startsWith('@') ? namedLocation(r, uri) : internalRedirect(r, uri, args);
  }
  if (ctx.jumped) {
    ctx.runtime.newCtx(r);
    return DECLINED;
  }
  const code = ctx.exit;
  if (code === undefined || code === OK) {
    if (ctx.phase === 'content' || headStarted(r)) return finishResponse(ctx);
    return ctx.phase === 'access' && code === OK ? OK : DECLINED;
  }
  if (code === -1) {
    dropOutput(r);
    return DONE;
  }
  // 408, 444, 499 close the connection, also after output (held output never goes out)
  if (CLOSING.has(code) && headStarted(r)) {
    dropOutput(r);
    return code;
  }
  if (code === DONE || headStarted(r)) return finishResponse(ctx);
  if (code >= 200 && code < 300 && code !== 204) {
    // ngx.exit(2xx) before any output answers with that status and no body (as OpenResty 0.10.23)
    r.status = code;
    return finishResponse(ctx);
  }
  return code;
}

function runHook(r: HttpRequest, hook: LuaHook, phase: string): HandlerResult | Promise<HandlerResult> {
  // lua_need_request_body: the whole body first (a failure to read it is the request's status)
  if (r.level.get(luaLoc).needBody && !requestBodyOf(r)) {
    return readRequestBody(r).then((got) => (typeof got === 'number' ? got : runHook(r, hook, phase)));
  }
  const runtime = runtimeOf(r);
  const signal = new KillSignal();
  const ctx: HookContext = { runtime, r, phase, signal };
  // lua_check_client_abort: ngx.on_abort's function, or the end of the request, when the client goes
  const stopWatching = watchClientAbort(ctx as HookContext & { r: HttpRequest });
  runtime.newThread(ctx);
  const outcome = runtime.run(hook, ctx, { signal });
  if (outcome instanceof Promise || stopWatching) {
    return Promise.resolve(outcome).then((o) => (runtime.delThread(ctx), afterThreads(ctx, o))).finally(() => {
      stopWatching?.();
      ctx.releaseFinish?.();
    });
  }
  runtime.delThread(ctx);
  if (ctx.threads?.size) return afterThreads(ctx, outcome).finally(() => ctx.releaseFinish?.());
  const result = afterHook(ctx, outcome);
  ctx.releaseFinish?.();
  return result;
}

/** The hook ended: its light threads still running are waited for first, as OpenResty's entry thread does. */
async function afterThreads(ctx: HookContext, outcome: HookOutcome<undefined>): Promise<HandlerResult> {
  // a failed hook ends its threads (OpenResty's entry thread aborting); one pending subrequests closes the connection
  if (!outcome.ok && ctx.exit === undefined && !ctx.jumped) {
    ctx.signal?.kill();
    if (ctx.noAbort) {
      ctx.runtime.logFailure(ctx, outcome);
      dropOutput(ctx.r!);
      return DONE;
    }
  }
  while (ctx.threads?.size && outcome.ok && ctx.exit === undefined && !ctx.jumped) await Promise.all(ctx.threads.values());
  return afterHook(ctx, outcome);
}

export function rewriteHandler(r: HttpRequest): HandlerResult | Promise<HandlerResult> {
  const hook = r.level.get(luaLoc).rewrite;
  return hook ? runHook(r, hook, 'rewrite') : DECLINED;
}

export function accessHandler(r: HttpRequest): HandlerResult | Promise<HandlerResult> {
  const hook = r.level.get(luaLoc).access;
  return hook ? runHook(r, hook, 'access') : DECLINED;
}

/** The content handler a `content_by_lua*` location gets. */
export function contentHandler(hook: LuaHook): (r: HttpRequest) => HandlerResult | Promise<HandlerResult> {
  return (r) => runHook(r, hook, 'content');
}

/**
 * OpenResty runs these hooks with a traceback as the message handler, which
 * leaves an error that is not a string alone: "unknown reason" has no traceback.
 */
export function failureText(what: string, outcome: { error: string; traceback: string; notString?: true }): string {
  // the message handler's traceback names no coroutine
  const tb = outcome.traceback && !outcome.notString ? '\n' + outcome.traceback.replace('stack traceback:\ncoroutine 0:', 'stack traceback:') : '';
  return `failed to run ${what}_by_lua*: ${outcome.error}${tb}`;
}

export function failed(r: HttpRequest, what: string, outcome: { error: string; traceback: string; notString?: true }): void {
  requestLog(r).error(failureText(what, outcome));
}

/** The log phase: log_by_lua, then the request's ngx.ctx tables are let go. */
export function logHandler(r: HttpRequest): number {
  const runtime = runtimes.get(r.main);
  if (!runtime) return DECLINED;
  // the request's cosockets end with it
  closeSocketsOf(mainRequest(r));
  const hook = r.level.get(luaLoc).log;
  if (hook) {
    const ctx: HookContext = { runtime, r, phase: 'log' };
    const outcome = runtime.run(hook, ctx);
    const done = (o: HookOutcome<undefined>) => {
      if (o.ok || ctx.exit !== undefined) {
        // nothing to say
      } else if ('unreadable' in o) runtime.logFailure(ctx, o); // the chunk did not load
      else logFor(ctx, LogLevel.error, failureText('log', o));
      runtime.release(r);
    };
    if (outcome instanceof Promise) void outcome.then(done);
    else done(outcome);
  } else runtime.release(r);
  return DECLINED;
}

/** set_by_lua: the hook's first result, as a string (nil is empty), or undefined when it failed. */
export function runSetHook(r: HttpRequest, hook: LuaHook, args: string[]): string | undefined {
  const runtime = runtimeOf(r);
  const ctx: HookContext = { runtime, r, phase: 'set', args };
  const { bridge } = runtime.vm;
  const outcome = runtime.run(hook, ctx, {
    results: (L, n) => (n > 0 ? bridge.toString(L, -n) ?? '' : ''),
  });
  if (outcome instanceof Promise) {
    requestLog(r).error('failed to run set_by_lua*: attempt to yield across C-call boundary');
    return undefined;
  }
  if (!outcome.ok) {
    // OpenResty runs set_by_lua outside a coroutine: no "coroutine 0:" line, and no traceback
    // for an error that is not a string
    const traceback = outcome.error === 'unknown reason' ? '' : outcome.traceback.replace(/^(stack traceback:\n)coroutine 0:\n/, '$1');
    requestLog(r).error(`failed to run set_by_lua*: ${outcome.error}${traceback ? '\n' + traceback : ''}`);
    return undefined;
  }
  return outcome.value;
}

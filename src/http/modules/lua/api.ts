/**
 * The host half of the `ngx` table (ngx.lua is the Lua half): output, exit,
 * ngx.var, ngx.header, ngx.status, ngx.arg, ngx.ctx and logging. ngx.req,
 * the utilities and the time functions are in api-req.ts and api-util.ts.
 */
import type { HostFunction } from '../../../lua/bridge.ts';
import { LuaError, T } from '../../../lua/bridge.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { escapeDefault } from '../../../core/access-log/format.ts';
import { headerOnly, headStarted, rawOutput, writeOutput } from './output.ts';
import { argsAndHeadersLibrary, reqLibrary } from './api-req.ts';
import { sharedLibrary } from './api-shared.ts';
import { locationLibrary } from './api-location.ts';
import { threadLibrary } from './api-thread.ts';
import { socketLibrary } from './api-socket.ts';
import { configLibrary, ndkLibrary, timeLibrary, utilLibrary } from './api-util.ts';
import { C_REFUSED, currentContext, endRequestLua, logFor, refuseIn, requestContext } from './runtime.ts';
import type { LuaRuntime } from './runtime.ts';
import type { LuaTimers } from './api-timer.ts';
import { CONSTANTS } from './constants.ts';
import { regexTable } from '../../../lua/re.ts';
import { mainErrorLog } from '../../../core/error-log.ts';
import { luaLoc } from './conf.ts';
import { balancerLibrary } from './balancer.ts';
import { semaphoreLibrary } from './semaphore.ts';
import { restyCoreLibrary, STANDALONE_PROCESS } from './api-resty-core.ts';
import type { LuaProcessHost } from './api-resty-core.ts';
import { abortLibrary } from './api-abort.ts';

const NEWLINE = 0x0a;
const OUTPUT_DISABLED = ['set', 'log', 'header_filter', 'body_filter', 'init_worker', 'timer'];

/** The response name a Lua key stands for: `_` is `-` (lua_transform_underscores_in_response_headers). */
function headerName(L: number, rt: LuaRuntime, r: HttpRequest): string {
  const name = rt.vm.bridge.toString(L, 1);
  if (name === undefined) throw new LuaError('bad argument #2 to \'?\' (string expected)');
  return r.level.get(luaLoc).transformUnderscores === false ? name : name.replace(/_/g, '-');
}

function setResponseHeader(r: HttpRequest, name: string, values: string[]): void {
  const lower = name.toLowerCase();
  const last = values.length ? values[values.length - 1] : undefined;
  switch (lower) {
    case 'content-type': r.contentType = last; return;
    case 'content-length': r.contentLength = last === undefined ? undefined : Number(last); return;
    case 'last-modified': r.lastModified = last === undefined ? undefined : Date.parse(last); return;
    case 'server': r.ownServer = last !== undefined; break;
    case 'date': r.ownDate = last !== undefined; break;
  }
  r.setHeader(name, undefined);
  for (const v of values) r.addHeader(name, v);
}

function responseHeaderValues(r: HttpRequest, name: string): string[] {
  const lower = name.toLowerCase();
  switch (lower) {
    case 'content-type': return r.contentType === undefined ? [] : [r.contentType];
    case 'content-length': return r.contentLength === undefined ? [] : [String(r.contentLength)];
    case 'last-modified': return r.lastModified === undefined ? [] : [new Date(r.lastModified).toUTCString()];
  }
  return r.headersOut.filter((h) => h.name.toLowerCase() === lower).map((h) => h.value);
}

export function hostLibrary(rt: LuaRuntime, timers: LuaTimers, proc: LuaProcessHost = STANDALONE_PROCESS): Record<string, unknown> {
  const { bridge } = rt.vm;
  const { api } = bridge;

  /** The values of argument `idx`: a string, a number, or a table of them (ngx.header's shapes). */
  const stringList = (L: number, idx: number): string[] => {
    const t = bridge.type(L, idx);
    if (t === T.NIL) return [];
    if (t !== T.TABLE) return [bridge.toString(L, idx) ?? String(bridge.toBoolean(L, idx))];
    const out: string[] = [];
    const n = api.lua_rawlen(L, idx);
    for (let i = 1; i <= n; i++) {
      api.lua_rawgeti(L, idx, BigInt(i));
      out.push(bridge.toString(L, -1) ?? '');
      api.lua_settop(L, -2);
    }
    return out;
  };

  const write: HostFunction = (L) => {
    // called from ngx.lua's output(), which ngx.say tail-calls: level 2 is ngx.say's caller
    const ctx = requestContext(rt, 2, OUTPUT_DISABLED);
    const r = ctx.r;
    const refused = rawOutput(r) ? 'raw request socket acquired' : headerOnly(r) ? 'header only'
      : ctx.eof || r.finished ? 'seen eof' : undefined;
    if (refused) {
      bridge.pushNil(L);
      bridge.pushString(L, refused);
      return 2;
    }
    // a second argument true: ngx.say's newline, added here (ngx.lua's one-string path)
    const data = api.lua_toboolean(L, 2) ? bridge.toBuffer(L, 1, NEWLINE) : bridge.toBuffer(L, 1);
    const wait = writeOutput(r, data ?? Buffer.alloc(0));
    if (wait) return bridge.suspend(wait, (L1) => (bridge.pushInteger(L1, 1), 1));
    bridge.pushInteger(L, 1);
    return 1;
  };

  const lib: Record<string, unknown> = {
    constants: CONSTANTS,
    null: (L: number) => {
      api.lua_pushlightuserdata(L, 0);
      return 1;
    },
    write,
    exit(L: number) {
      const ctx = currentContext(rt);
      if (!ctx) throw new LuaError('API disabled in the context of init_by_lua*');
      // OpenResty's ngx.exit allows rewrite, access, content, header filter, timers and balancer
      if (ctx.phase === 'set' || ctx.phase === 'log' || ctx.phase === 'body_filter') refuseIn(ctx, [ctx.phase], 2);
      const status = bridge.toInteger(L, 1) ?? 0;
      endRequestLua(ctx, status, 2);
      ctx.exit = status;
      return 0;
    },
    exec(L: number) {
      const ctx = requestContext(rt, 2, C_REFUSED);
      const uri = bridge.toString(L, 1);
      if (!uri) throw new LuaError('The uri argument is empty', 2);
      let args = bridge.type(L, 2) === T.TABLE ? encodeArgsAt(L, 2) : bridge.toString(L, 2);
      let path = uri;
      const q = uri.indexOf('?');
      if (q >= 0) {
        path = uri.slice(0, q);
        args = uri.slice(q + 1) + (args ? '&' + args : '');
      }
      endRequestLua(ctx, undefined, 2);
      ctx.exec = { uri: path, args };
      ctx.exit = 0;
      return 0;
    },
    redirect(L: number) {
      const ctx = requestContext(rt, 2, C_REFUSED);
      const status = bridge.toInteger(L, 2) ?? 302;
      if (![301, 302, 303, 307, 308].includes(status)) {
        throw new LuaError('only ngx.HTTP_MOVED_TEMPORARILY, ngx.HTTP_MOVED_PERMANENTLY, ngx.HTTP_PERMANENT_REDIRECT, ngx.HTTP_SEE_OTHER, and ngx.HTTP_TEMPORARY_REDIRECT are allowed', 2);
      }
      if (headStarted(ctx.r)) throw new LuaError('attempt to call ngx.redirect after sending out the headers', 2);
      const uri = bridge.toString(L, 1) ?? '';
      // %00-%08, %0A-%1F and %7F would split or end the Location header
      const unsafe = /[\x00-\x08\x0a-\x1f\x7f]/.exec(uri);
      if (unsafe) {
        const hex = unsafe[0].charCodeAt(0).toString(16).padStart(2, '0');
        throw new LuaError(`unsafe byte "0x${hex}" in redirect uri "${escapeDefault(uri)}"`, 2);
      }
      endRequestLua(ctx, undefined, 2);
      // OpenResty's Location goes out as given (nginx does not make it absolute)
      ctx.r.setHeader('Location', uri);
      requestLog(ctx.r).debug(`lua redirect to "${uri}" with code ${status}`);
      ctx.exit = status;
      return 0;
    },
    log(L: number) {
      const level = bridge.toInteger(L, 1) ?? 0;
      if (level < 0 || level > 8) throw new LuaError(`bad log level: ${level}`);
      const msg = '[lua] ' + (bridge.toString(L, 2) ?? '');
      logFor(currentContext(rt), level, msg);
      return 0;
    },
    var_get(L: number) {
      const { r } = requestContext(rt, 2);
      const type = bridge.type(L, 1);
      if (type !== T.NUMBER && type !== T.STRING) throw new LuaError('bad variable name', 2);
      const key = type === T.NUMBER ? bridge.toInteger(L, 1) : undefined;
      const v = key !== undefined ? r.captures?.[key] : r.main.variables.valueByName(r, (bridge.toString(L, 1) ?? '').toLowerCase());
      if (v === undefined) bridge.pushNil(L);
      else bridge.pushString(L, v);
      return 1;
    },
    var_set(L: number) {
      const { r } = requestContext(rt, 2);
      if (bridge.type(L, 1) !== T.STRING) throw new LuaError('bad variable name', 2);
      const name = bridge.toString(L, 1)!.toLowerCase();
      const vars = r.main.variables;
      const def = vars.lookup(name);
      if (!def || def.prefix) {
        throw new LuaError(`variable "${name}" not found for writing; maybe it is a built-in variable that is not changeable or you forgot to use "set $${name} '';" in the config file to define it first`, 2);
      }
      if (!def.changeable && !def.set) throw new LuaError(`variable "${name}" not changeable`, 2);
      // nil makes the variable "not found" (read back as nil), as OpenResty sets not_found
      const value = bridge.type(L, 2) === T.NIL ? undefined : bridge.toString(L, 2) ?? '';
      vars.assign(r, vars.index(name), value);
      return 0;
    },
    header_get(L: number) {
      const { r } = requestContext(rt, 2);
      const values = responseHeaderValues(r, headerName(L, rt, r));
      if (values.length === 0) bridge.pushNil(L);
      else if (values.length === 1) bridge.pushString(L, values[0]);
      else {
        api.lua_createtable(L, values.length, 0);
        values.forEach((v, i) => { bridge.pushString(L, v); api.lua_rawseti(L, -2, BigInt(i + 1)); });
      }
      return 1;
    },
    header_set(L: number) {
      const ctx = requestContext(rt, 2);
      const name = headerName(L, rt, ctx.r);
      if (headStarted(ctx.r) && ctx.phase !== 'header_filter') {
        requestLog(ctx.r).error(`attempt to set ngx.header.HEADER after sending out response headers`);
        return 0;
      }
      const values = stringList(L, 2);
      // nginx's ngx_atoof must take a Content-Length (ngx.lua's __newindex is level 1)
      if (name.toLowerCase() === 'content-length' && values.length && !/^\d+$/.test(values[values.length - 1])) {
        throw new LuaError('failed to set header', 2);
      }
      setResponseHeader(ctx.r, name, values);
      return 0;
    },
    status_get(L: number) {
      const { r } = requestContext(rt, 2);
      bridge.pushInteger(L, r.status);
      return 1;
    },
    status_set(L: number) {
      const ctx = requestContext(rt, 2);
      if (headStarted(ctx.r) && ctx.phase !== 'header_filter') {
        requestLog(ctx.r).error('attempt to set ngx.status after sending out response headers');
        return 0;
      }
      const status = bridge.toInteger(L, 1);
      if (status === undefined) throw new LuaError('attempt to set ngx.status to a non-number', 2);
      ctx.r.status = status;
      return 0;
    },
    ctx_id(L: number) {
      const ctx = currentContext(rt);
      if (ctx?.phase === 'init_worker' || ctx?.phase === 'timer') {
        bridge.pushInteger(L, ctx.phase === 'timer' ? rt.ownCtxId(ctx) : rt.workerCtxId());
        return 1;
      }
      const { r } = requestContext(rt);
      bridge.pushInteger(L, rt.ctxId(r));
      return 1;
    },
    arg_get(L: number) {
      const ctx = currentContext(rt);
      const v = ctx?.args?.[(bridge.toInteger(L, 1) ?? 0) - 1];
      if (typeof v === 'string') bridge.pushString(L, v);
      else if (v instanceof Buffer) bridge.pushBytes(L, v);
      else if (typeof v === 'boolean') bridge.pushBoolean(L, v);
      else bridge.pushNil(L);
      return 1;
    },
    arg_set(L: number) {
      const ctx = currentContext(rt);
      if (ctx?.phase !== 'body_filter' || !ctx.args) throw new LuaError('attempt to write to ngx.arg', 1);
      const i = bridge.toInteger(L, 1);
      if (i !== 1 && i !== 2) throw new LuaError(`bad index: ${i ?? 0}`, 1);
      if (i === 2) ctx.args[1] = bridge.toBoolean(L, 2);
      else {
        const t = bridge.type(L, 2);
        if (t !== T.NIL && t !== T.STRING && t !== T.NUMBER) throw new LuaError(`bad chunk data type: ${bridge.typeName(L, 2)}`, 1);
        ctx.args[0] = t === T.NIL ? '' : bridge.toString(L, 2) ?? '';
      }
      return 0;
    },
    arg_count(L: number) {
      bridge.pushInteger(L, currentContext(rt)?.args?.length ?? 0);
      return 1;
    },
    worker: {
      // nil in the privileged agent, as OpenResty's
      id: (L: number) => (rt.workerId < 0 ? bridge.pushNil(L) : bridge.pushInteger(L, rt.workerId), 1),
      count: (L: number) => (bridge.pushInteger(L, rt.workerCount), 1),
      pid: (L: number) => (bridge.pushInteger(L, process.pid), 1),
      // workers are threads of one process: every worker's pid is this one
      pids: (L: number) => {
        api.lua_createtable(L, rt.workerCount, 0);
        for (let i = 1; i <= rt.workerCount; i++) {
          bridge.pushInteger(L, process.pid);
          api.lua_rawseti(L, -2, BigInt(i));
        }
        return 1;
      },
      exiting: (L: number) => (bridge.pushBoolean(L, timers.exiting), 1),
    },
    req: reqLibrary(rt),
    util: utilLibrary(rt),
    ndk: ndkLibrary(rt),
    time: timeLibrary(rt),
    config: configLibrary(rt, rt.prefix),
    shdict: sharedLibrary(rt, rt.conf.sharedDicts),
    location: locationLibrary(rt),
    timer: timers.library(),
    re_table: regexTable(bridge, (message) => mainErrorLog().error(message)),
    thread: threadLibrary(rt),
    balancer: balancerLibrary(rt),
    semaphore: semaphoreLibrary(rt, () => timers.exiting),
    resty_core: restyCoreLibrary(rt, proc),
    abort: abortLibrary(rt),
    socket: socketLibrary(rt),
    ...argsAndHeadersLibrary(rt),
  };

  /** ngx.encode_args of the table at `idx` (also ngx.exec's table of args). */
  function encodeArgsAt(L: number, idx: number): string {
    bridge.getGlobal(L, 'ngx');
    bridge.getField(L, -1, 'encode_args');
    api.lua_pushvalue(L, idx);
    bridge.call(L, 1, 1);
    const s = bridge.toString(L, -1) ?? '';
    api.lua_settop(L, -3);
    return s;
  }
  return lib;
}

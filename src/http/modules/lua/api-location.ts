/**
 * ngx.location.capture and capture_multi: subrequests (src/http/subrequest.ts)
 * whose bodies are kept in memory. `start` creates one and gives its id (and
 * the id of its ngx.ctx, which ngx.lua fills from the `ctx` option); `run`
 * runs it; `wait` suspends the hook until every id given is done and
 * returns, for each, its status, body, headers (name, value in turn) and
 * whether the body was cut short. ngx.lua builds OpenResty's result tables.
 */
import { Writable } from 'node:stream';
import { LuaError, T } from '../../../lua/bridge.ts';
import { requestLog } from '../../request-log.ts';
import { createSubrequest, mainRequest } from '../../subrequest.ts';
import { logSubrequest } from '../../phases.ts';
import type { HttpRequest } from '../../request.ts';
import { C_REFUSED, requestContext } from './runtime.ts';
import { pushMultiTable, responseHeaderList } from './api-req.ts';
import { bodyCut } from './filters.ts';
import { prepareHeader } from './output.ts';
import type { LuaRuntime } from './runtime.ts';

interface Capture {
  sr: HttpRequest | undefined;
  /** Runs the subrequest (not yet run when undefined). */
  run?: () => void;
  chunks: Buffer[];
  done: Promise<boolean>;
}

const METHODS: Record<number, string> = {
  2: 'GET', 4: 'HEAD', 8: 'POST', 16: 'PUT', 32: 'DELETE', 64: 'MKCOL', 128: 'COPY', 256: 'MOVE', 512: 'OPTIONS',
  1024: 'PROPFIND', 2048: 'PROPPATCH', 4096: 'LOCK', 8192: 'UNLOCK', 16384: 'PATCH', 32768: 'TRACE',
};
/** The `share_all_vars` / `copy_all_vars` options, as ngx.lua passes them. */
const VARIABLES = ['own', 'share', 'copy'] as const;

/**
 * The `vars` option: each name set in the subrequest as OpenResty's
 * ngx_http_lua_subrequest_add_extra_vars does; an error status (nginx's
 * rc) when one cannot be, logged for the parent (the connection's request).
 */
function setExtraVariables(r: HttpRequest, sr: HttpRequest, list: string[]): number {
  const vars = sr.main.variables;
  for (let i = 0; i < list.length; i += 2) {
    const name = list[i].toLowerCase();
    const def = vars.lookup(name);
    if (!def || def.prefix) {
      requestLog(r).error(`variable "${name}" cannot be assigned a value (maybe you forgot to define it first?) `);
      return -1;
    }
    if (!def.changeable && !def.set) {
      requestLog(r).error(`variable "${name}" not changeable`);
      return 500;
    }
    vars.assign(sr, vars.index(name), list[i + 1]);
  }
  return 0;
}

/** A capture's `header` table: the response's headers, with Last-Modified where its status keeps one (as OpenResty builds it). */
function captureHeaders(sr: HttpRequest): string[] {
  const list = responseHeaderList(sr);
  const s = sr.status;
  if (sr.lastModified !== undefined && (s === 200 || s === 206 || s === 304 || s === 204)) {
    list.push('Last-Modified', new Date(sr.lastModified).toUTCString());
  }
  return list;
}

/**
 * A capture finalized with a status before its head (OpenResty's
 * ngx_http_lua_post_subrequest): an error status is its result, with no
 * body and no error page; a closing status (444, 408, 499) ends the client's request.
 */
function finalizedCapture(sr: HttpRequest, rc: number, sink: Writable): boolean {
  if (rc === 444 || rc === 408 || rc === 499) {
    mainRequest(sr).sink.abort();
    return true;
  }
  if (rc < 300 && rc !== 201 && rc !== 204) return false;
  sr.status = rc;
  sr.contentType = undefined;
  sr.lastModified = undefined;
  prepareHeader(sr);
  // no last buffer went through the body filters: the result is `truncated`
  unended.add(sr);
  sink.end();
  return true;
}

/** Captures that ended without their body's end (finalized with an error status). */
const unended = new WeakSet<HttpRequest>();

export function locationLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  const { api } = bridge;
  const captures = new Map<number, Capture>();
  let nextId = 1;

  return {
    start(L: number) {
      // level 3: ngx.location.capture(_multi) calls this through its local begin()
      const ctx = requestContext(rt, 3, [...C_REFUSED, 'init_worker']);
      const target = bridge.toString(L, 1) ?? '';
      if (target === '') throw new LuaError('uri is empty', 2);
      let uri = target;
      let args = bridge.toString(L, 2) ?? '';
      const q = target.indexOf('?');
      if (q >= 0) {
        uri = target.slice(0, q);
        args = target.slice(q + 1) + (args ? '&' + args : '');
      }
      const code = bridge.toInteger(L, 3) ?? 2;
      // then ngx.lua's checked options: 5 `body`, 6 the variables' mode, 7 `always_forward_body`, the `vars` pairs
      const given = bridge.type(L, 5) === T.NIL ? undefined : bridge.toBuffer(L, 5) ?? Buffer.alloc(0);
      const variables = VARIABLES[bridge.toInteger(L, 6) ?? 0] ?? 'own';
      const extra: string[] = [];
      for (let i = 8; i <= api.lua_gettop(L); i++) extra.push(bridge.toString(L, i) ?? '');
      // the parent's body goes only to PUT and POST unless always_forward_body (OpenResty's adjust_subrequest)
      const dropBody = given === undefined && !bridge.toBoolean(L, 7) && code !== 8 && code !== 16 && ctx.r.head.contentLength > 0;
      const chunks: Buffer[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _enc, cb) {
          chunks.push(chunk);
          cb();
        },
      });
      // a capture gathers the body itself (OpenResty's capture filter), so captures may nest
      const sub = createSubrequest(ctx.r, uri, args, {
        sink, variables, requestBody: dropBody ? null : given, logPrefix: 'lua ', contained: true, copyHeaders: true,
        onFinalize: (sr, rc) => finalizedCapture(sr, rc, sink),
      });
      if (!sub) throw new LuaError('failed to issue subrequest: -1');
      const id = nextId++;
      requestLog(ctx.r).debug(`lua http subrequest "${uri}?${args}"`);
      const method = METHODS[code];
      const rc = method === undefined ? -1 : setExtraVariables(ctx.r, sub.r, extra);
      if (method === undefined) requestLog(ctx.r).error(`unsupported HTTP method: ${code}`);
      if (rc !== 0) {
        sub.abort();
        throw new LuaError(`failed to adjust the subrequest: ${rc}`);
      }
      sub.r.method = method;
      const sr = sub.r;
      captures.set(id, { sr, chunks, done: sub.done.then((ok) => { logSubrequest(sr); return ok; }), run: () => sub.start() });
      bridge.pushInteger(L, id);
      // the `ctx` option: the subrequest's ngx.ctx is the caller's table
      if (!bridge.toBoolean(L, 4)) return 1;
      bridge.pushInteger(L, rt.ctxId(sr));
      return 2;
    },
    run(L: number) {
      const c = captures.get(bridge.toInteger(L, 1) ?? 0);
      const run = c?.run;
      if (c) c.run = undefined;
      run?.();
      return 0;
    },
    wait(L: number) {
      const ctx = requestContext(rt);
      const n = api.lua_gettop(L);
      const list: Capture[] = [];
      for (let i = 1; i <= n; i++) {
        const id = bridge.toInteger(L, i) ?? 0;
        const c = captures.get(id);
        if (!c) throw new LuaError('bad capture id', 2);
        captures.delete(id);
        list.push(c);
      }
      // until they are done, the request's Lua cannot end (OpenResty's ctx->no_abort)
      ctx.noAbort = (ctx.noAbort ?? 0) + 1;
      const all = Promise.all(list.map((c) => c.done));
      void all.finally(() => ctx.noAbort!--);
      return bridge.suspend(all, (L1, oks) => {
        api.lua_createtable(L1, list.length * 4, 0);
        list.forEach((c, i) => {
          const sr = c.sr;
          // one that failed before its head has a 500 with the head Lua would have sent
          if (sr && !oks[i] && !sr.headerSent && !sr.status) {
            sr.status = 500;
            prepareHeader(sr);
          }
          bridge.pushInteger(L1, sr ? sr.status || (oks[i] ? 200 : 500) : 500);
          api.lua_rawseti(L1, -2, BigInt(i * 4 + 1));
          bridge.pushBytes(L1, Buffer.concat(c.chunks));
          api.lua_rawseti(L1, -2, BigInt(i * 4 + 2));
          pushMultiTable(bridge, L1, sr ? captureHeaders(sr) : []);
          api.lua_rawseti(L1, -2, BigInt(i * 4 + 3));
          bridge.pushBoolean(L1, !oks[i] || (sr !== undefined && (bodyCut(sr) || unended.has(sr))));
          api.lua_rawseti(L1, -2, BigInt(i * 4 + 4));
          if (sr) rt.release(sr);
        });
        return 1;
      });
    },
  };
}

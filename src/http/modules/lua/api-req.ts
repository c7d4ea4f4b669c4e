/**
 * ngx.req.* (the host functions; ngx.lua gives the header tables they return
 * OpenResty's metatable), ngx.decode_args and ngx.resp.get_headers.
 */
import fs from 'node:fs';
import { LuaError, T } from '../../../lua/bridge.ts';
import type { LuaBridge } from '../../../lua/bridge.ts';
import { readRequestBody, replaceBody, requestBodyOf } from '../../request-body.ts';
import type { HttpRequest } from '../../request.ts';
import { mainErrorLog } from '../../../core/error-log.ts';
import { requestLog } from '../../request-log.ts';
import { CONN_CLOSE, CONN_KEEPALIVE } from '../../request-head.ts';
import { C_REFUSED, endRequestLua, requestContext } from './runtime.ts';
import type { LuaRuntime } from './runtime.ts';
import { parseArgs } from '../../uri.ts';

/**
 * Pushes the table OpenResty makes of name/value pairs (ngx.req.get_headers, get_uri_args, …):
 * a name seen again makes its value an array of all its values, in order. `lower`: names in
 * lower case (ASCII only, as string.lower). Built here rather than in Lua from a flat list: that
 * loop (a list table, a lowered Lua string per name) was most of a small get_headers' cost. The
 * names go in in first-seen order into a table grown from empty, as that loop put them.
 */
export function pushMultiTable(bridge: LuaBridge, L: number, list: ReadonlyArray<string | boolean>, lower = false): void {
  const { api } = bridge;
  const groups = new Map<string, Array<string | boolean>>();
  for (let i = 0; i < list.length; i += 2) {
    const name = lower ? asciiLower(list[i] as string) : list[i] as string;
    const values = groups.get(name);
    if (values) values.push(list[i + 1]);
    else groups.set(name, [list[i + 1]]);
  }
  api.lua_createtable(L, 0, 0);
  for (const [name, values] of groups) {
    bridge.pushString(L, name);
    if (values.length === 1) pushScalar(bridge, L, values[0]);
    else {
      api.lua_createtable(L, values.length, 0);
      for (let i = 0; i < values.length; i++) {
        pushScalar(bridge, L, values[i]);
        api.lua_rawseti(L, -2, BigInt(i + 1));
      }
    }
    api.lua_rawset(L, -3);
  }
}

function pushScalar(bridge: LuaBridge, L: number, v: string | boolean): void {
  if (typeof v === 'string') bridge.pushString(L, v);
  else bridge.pushBoolean(L, v);
}

/** string.lower's result: only A-Z change (toLowerCase would also change Latin-1 letters). */
function asciiLower(s: string): string {
  let upper = false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
    if (c >= 0x41 && c <= 0x5a) upper = true;
  }
  return upper ? s.toLowerCase() : s;
}

function pushListResult(bridge: LuaBridge, L: number, res: { list: Array<string | boolean>; truncated: boolean }, max?: number, lower = false): number {
  pushMultiTable(bridge, L, res.list, lower);
  if (!res.truncated) return 1;
  if (max !== undefined) mainErrorLog().debug(`lua hit query args limit ${max}`);
  bridge.pushString(L, 'truncated');
  return 2;
}

/** The methods of ngx.HTTP_* (OpenResty's ngx.req.set_method takes these). */
const METHOD_NAMES: Record<number, string> = {
  2: 'GET', 4: 'HEAD', 8: 'POST', 16: 'PUT', 32: 'DELETE', 64: 'MKCOL', 128: 'COPY', 256: 'MOVE', 512: 'OPTIONS',
  1024: 'PROPFIND', 2048: 'PROPPATCH', 4096: 'LOCK', 8192: 'UNLOCK', 16384: 'PATCH', 32768: 'TRACE',
};

function bodyText(r: HttpRequest): string | undefined {
  const b = requestBodyOf(r);
  if (!b || b.file !== undefined || b.length === 0) return undefined;
  return Buffer.concat(b.bufs).toString('latin1');
}

export function reqLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  const { api } = bridge;
  // (level 2: the code calling an ngx.lua wrapper of this host function)
  const req = (level = 1) => requestContext(rt, level).r;

  /** Replaces request header `name` with `values` (none: removes it), as ngx.req.set_header. */
  const setHeader = (r: HttpRequest, name: string, values: string[]): void => {
    const lower = name.toLowerCase();
    const list = r.headersIn;
    for (let i = list.length - 2; i >= 0; i -= 2) if (list[i].toLowerCase() === lower) list.splice(i, 2);
    for (const v of values) list.push(name, v);
    if (lower === 'host') r.host = (values[0] ?? '').toLowerCase().replace(/:\d*$/, '');
  };

  return {
    get_method: (L: number) => (bridge.pushString(L, req().method), 1),
    set_method(L: number) {
      const code = bridge.toInteger(L, 1) ?? 0;
      const name = METHOD_NAMES[code];
      if (!name) throw new LuaError(`unsupported HTTP method: ${code}`);
      const r = req();
      r.method = name;
      // nginx decides a HEAD response has no body by the method when the head goes
      if (!r.parent && !r.headerSent) r.sink.setHeadOnly?.(name === 'HEAD');
      return 0;
    },
    http_version(L: number) {
      const v = req().httpVersion;
      bridge.pushJsNumber(L, Number(v));
      return 1;
    },
    start_time: (L: number) => (bridge.pushNumber(L, req().startMs / 1000), 1),
    is_internal: (L: number) => (bridge.pushBoolean(L, req().internal), 1),
    headers_list(L: number) {
      const r = req(2);
      const max = bridge.toInteger(L, 1) ?? 100;
      const list = r.headersIn;
      const truncated = max > 0 && list.length / 2 > max;
      return pushListResult(bridge, L, { list: truncated ? list.slice(0, max * 2) : list, truncated }, undefined, !bridge.toBoolean(L, 2));
    },
    raw_header(L: number) {
      const r = req();
      const noRequestLine = bridge.toBoolean(L, 1);
      const raw = r.head.raw;
      if (raw !== undefined) {
        bridge.pushString(L, noRequestLine ? raw.slice(raw.indexOf('\n') + 1) : raw);
        return 1;
      }
      // HTTP/2: the head rebuilt from what was parsed
      let s = noRequestLine ? '' : `${r.rawRequestLine ?? ''}\r\n`;
      for (let i = 0; i < r.headersIn.length; i += 2) s += `${r.headersIn[i]}: ${r.headersIn[i + 1]}\r\n`;
      bridge.pushString(L, s + '\r\n');
      return 1;
    },
    set_header(L: number) {
      const ctx = requestContext(rt);
      const name = bridge.toString(L, 1);
      if (name === undefined) throw new LuaError('bad argument #1 to \'set_header\' (string expected)');
      const values: string[] = [];
      if (bridge.type(L, 2) === T.TABLE) {
        const n = api.lua_rawlen(L, 2);
        for (let i = 1; i <= n; i++) {
          api.lua_rawgeti(L, 2, BigInt(i));
          values.push(bridge.toString(L, -1) ?? '');
          api.lua_settop(L, -2);
        }
      } else if (bridge.type(L, 2) !== T.NIL) values.push(bridge.toString(L, 2) ?? '');
      setHeader(ctx.r, name.replace(/_/g, '-'), values);
      return 0;
    },
    clear_header(L: number) {
      const ctx = requestContext(rt);
      setHeader(ctx.r, (bridge.toString(L, 1) ?? '').replace(/_/g, '-'), []);
      return 0;
    },
    uri_args_list(L: number) {
      const r = req(2);
      const max = bridge.toInteger(L, 1) ?? 100;
      return pushListResult(bridge, L, parseArgs(r.args, max), max);
    },
    post_args_list(L: number) {
      const r = req(2);
      const b = requestBodyOf(r);
      if (!b) throw new LuaError('no request body found; maybe you should turn on lua_need_request_body?', 2);
      if (b.file !== undefined) {
        bridge.pushNil(L);
        bridge.pushString(L, 'request body in temp file not supported');
        return 2;
      }
      const max = bridge.toInteger(L, 1) ?? 100;
      return pushListResult(bridge, L, parseArgs(bodyText(r) ?? '', max), max);
    },
    read_body(_L: number) {
      const ctx = requestContext(rt, 2, C_REFUSED);
      return bridge.suspend(readRequestBody(ctx.r), (L1, got) => {
        if (typeof got !== 'number') return 0;
        bridge.pushInteger(L1, got);
        return 1;
      });
    },
    discard_body: () => (req(), 0),
    set_body_data(L: number) {
      const r = req();
      const body = requestBodyOf(r);
      if (!body) throw new LuaError('request body not read yet');
      replaceBody(r, body, [bridge.toBuffer(L, 1) ?? Buffer.alloc(0)]);
      return 0;
    },
    /** ngx.req.set_body_file(path, auto_clean): the body is that file (removed with the request when auto_clean). */
    set_body_file(L: number) {
      const r = req();
      const n = bridge.api.lua_gettop(L);
      if (n < 1 || n > 2) throw new LuaError(`expecting 1 or 2 arguments but seen ${n}`);
      const body = requestBodyOf(r);
      if (!body) throw new LuaError('request body not read yet');
      const file = bridge.toString(L, 1) ?? '';
      let size: number;
      try { size = fs.statSync(file).size; } catch { throw new LuaError(`stat() "${file}" failed`); }
      replaceBody(r, body, []);
      body.file = file;
      body.length = size;
      r.headersIn[r.headersIn.length - 1] = String(size);
      if (bridge.toBoolean(L, 2)) r.sink.onClose(() => fs.unlink(file, () => undefined));
      return 0;
    },
    init_body(L: number) {
      const r = req();
      const body = requestBodyOf(r);
      if (!body) throw new LuaError('request body not read yet');
      replaceBody(r, body, []);
      void L;
      return 0;
    },
    append_body(L: number) {
      const r = req();
      const body = requestBodyOf(r);
      if (!body) throw new LuaError('request body not initialized');
      const chunk = bridge.toBuffer(L, 1) ?? Buffer.alloc(0);
      replaceBody(r, body, [...body.bufs, chunk]);
      return 0;
    },
    finish_body: () => (req(), 0),
    get_body_data(L: number) {
      const text = bodyText(req());
      if (text === undefined) bridge.pushNil(L);
      else bridge.pushString(L, text);
      return 1;
    },
    get_body_file(L: number) {
      const file = requestBodyOf(req())?.file;
      if (file === undefined) bridge.pushNil(L);
      else bridge.pushString(L, file);
      return 1;
    },
    set_uri(L: number) {
      const ctx = requestContext(rt, 2);
      const uri = bridge.toString(L, 1);
      if (!uri) throw new LuaError('attempt to use zero-length uri');
      const jump = bridge.toBoolean(L, 2);
      if (jump && ctx.phase !== 'rewrite') throw new LuaError(`API disabled in the context of ${ctx.phase}_by_lua*`);
      if (jump) endRequestLua(ctx, undefined, 2);
      ctx.r.uri = uri;
      if (jump) {
        ctx.r.uriChanged = true;
        ctx.jumped = true;
      }
      bridge.pushBoolean(L, jump);
      return 1;
    },
    set_uri_args(L: number) {
      const r = req();
      let args: string;
      if (bridge.type(L, 1) === T.TABLE) {
        bridge.getGlobal(L, 'ngx');
        bridge.getField(L, -1, 'encode_args');
        api.lua_pushvalue(L, 1);
        bridge.call(L, 1, 1);
        args = bridge.toString(L, -1) ?? '';
      } else args = bridge.toString(L, 1) ?? '';
      r.args = args;
      r.hasArgs = args !== '';
      return 0;
    },
  };
}

/** The response headers as name, value in turn (nginx's own fields first). */
export function responseHeaderList(r: HttpRequest): string[] {
  const list: string[] = [];
  if (r.contentType !== undefined) list.push('Content-Type', r.contentType);
  if (r.contentLength !== undefined) list.push('Content-Length', String(r.contentLength));
  if (r.location !== undefined) list.push('Location', r.location);
  for (const h of r.headersOut) list.push(h.name, h.value);
  return list;
}

/** nginx's r->keepalive before the head: HTTP/1.1 unless `Connection: close`, HTTP/1.0 with `keep-alive`. */
function requestKeepsAlive(r: HttpRequest): boolean {
  const c = r.head.connection;
  return c === CONN_CLOSE ? false : c === CONN_KEEPALIVE ? true : r.head.version > 1000;
}

/** ngx.decode_args's table and ngx.resp.get_headers's, for ngx.lua. */
export function argsAndHeadersLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  return {
    decode_args_list(L: number) {
      const s = bridge.toString(L, 1) ?? '';
      pushMultiTable(bridge, L, parseArgs(s, bridge.toInteger(L, 2) ?? 100).list);
      return 1;
    },
    resp_headers_list(L: number) {
      const { r, phase } = requestContext(rt);
      const max = bridge.toInteger(L, 1) ?? 100;
      // OpenResty's own entries come first and are always given; the others fill up to `max`
      const own: string[] = [];
      const rest = responseHeaderList(r);
      if (r.contentType !== undefined) own.push('content-type', rest.splice(0, 2)[1]);
      if (r.contentLength !== undefined) own.push('content-length', rest.splice(0, 2)[1]);
      // the connection's fate: the head's once built (after the header filters), else the request's (nginx's r->keepalive)
      const keep = r.headerSent && phase !== 'header_filter' ? r.keepalive : requestKeepsAlive(r);
      own.push('connection', r.status === 101 ? 'upgrade' : keep ? 'keep-alive' : 'close');
      if (r.chunked) own.push('transfer-encoding', 'chunked');
      const count = (own.length + rest.length) / 2;
      const truncated = max > 0 && count > max;
      if (truncated) {
        requestLog(r).debug(`lua exceeding response header limit ${count} > ${max}`);
        rest.length = Math.max(0, max * 2 - own.length);
      }
      return pushListResult(bridge, L, { list: own.concat(rest), truncated }, undefined, !bridge.toBoolean(L, 2));
    },
  };
}

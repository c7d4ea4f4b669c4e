/**
 * ngx.sleep/flush/eof, the string utilities (escaping, args, digests,
 * base64, SQL quoting), the time functions, and ngx.config.
 */
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { LuaError, T } from '../../../lua/bridge.ts';
import { buffering, finishOutput, flushOutput, headerOnly, headStarted, rawOutput, somethingToFlush, startHead } from './output.ts';
import { C_REFUSED, currentContext, refuseIn, requestContext } from './runtime.ts';
import { requestLog } from '../../request-log.ts';
import type { LuaRuntime } from './runtime.ts';
import { cookieTime } from '../../../core/http-time.ts';
import { ngxDecodeBase64 } from '../../../core/base64.ts';
import { escapeUriComponent, unescapeArg } from '../../uri.ts';
import { ndkSetVar } from '../set-misc.ts';

/**
 * The other types of ngx.escape_uri(s, type), nginx 1.22's ngx_escape_uri sets (0 uri, 1 args,
 * 3 html, 4 refresh, 5 memcached; 6 escapes as 5 does with Debian's nginx): control bytes, these,
 * and (but for 5 and 6) DEL and bytes over 0x7f.
 */
const ESCAPE_SETS: Record<number, string> = { 0: ' #%?', 1: ' #%+?', 3: ' "#%\'', 4: ' "\'', 5: ' %', 6: ' %' };

function escapeAs(type: number, s: string): string {
  const set = ESCAPE_SETS[type];
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const escape = c < 0x20 || set.includes(s[i]) || (type < 5 && c >= 0x7f);
    out += escape ? '%' + c.toString(16).toUpperCase().padStart(2, '0') : s[i];
  }
  return out;
}


function quoteSql(s: string): string {
  const map: Record<string, string> = { '\0': '\\0', '\b': '\\b', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\x1a': '\\Z', '\\': '\\\\', "'": "\\'", '"': '\\"' };
  return "'" + s.replace(/[\0\b\n\r\t\x1a\\'"]/g, (c) => map[c]) + "'";
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');
function localDate(d: Date): string {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** ndk.set_var.NAME(value): the set-misc directive's transformation, for the running request. */
export function ndkLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  const arg = (L: number, i: number) => bridge.toString(L, i) ?? '';
  return {
    has: (L: number) => (bridge.pushBoolean(L, ndkSetVar.has(arg(L, 1))), 1),
    set_var(L: number) {
      const ctx = currentContext(rt);
      if (!ctx?.r && ctx?.phase !== 'timer') throw new LuaError('no request found');
      bridge.pushString(L, ndkSetVar.get(arg(L, 1))!(ctx.r, [arg(L, 2)]) ?? '');
      return 1;
    },
  };
}

export function utilLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  const { api } = bridge;
  const str = (L: number, i: number, fn: string): string => {
    const t = bridge.type(L, i);
    if (t === T.NIL) return '';
    const s = bridge.toString(L, i);
    if (s === undefined) throw new LuaError(`bad argument #${i} to '${fn}' (string expected, got ${bridge.typeName(L, i)})`);
    return s;
  };
  const bin = (L: number, i: number, fn: string) => Buffer.from(str(L, i, fn), 'latin1');
  const ret = (L: number, s: string) => (bridge.pushString(L, s), 1);
  /** ngx.flush/ngx.eof after ngx.req.socket(true). */
  const refuseRaw = (L: number) => (bridge.pushNil(L), bridge.pushString(L, 'raw request socket acquired'), 2);

  return {
    sleep(L: number) {
      const ctx = currentContext(rt);
      if (!ctx) throw new LuaError('API disabled in the context of init_by_lua*');
      refuseIn(ctx, ['set', 'log', 'header_filter', 'body_filter', 'init_worker']);
      const n = bridge.api.lua_gettop(L);
      if (n !== 1) throw new LuaError(`attempt to pass ${n} arguments, but accepted 1`);
      const seconds = bridge.toNumber(L, 1);
      if (seconds === undefined) throw new LuaError(`bad argument #1 to 'sleep' (number expected, got ${bridge.typeName(L, 1)})`);
      // whole milliseconds, as OpenResty's timer takes them
      const delay = Math.trunc(seconds * 1000);
      if (delay < 0) throw new LuaError(`invalid sleep duration "${delay}"`);
      const r = ctx.r;
      if (r) requestLog(r).debug(`lua ready to sleep for ${delay} ms`);
      let timer: NodeJS.Timeout | undefined;
      const expired = new Promise((resolve) => (timer = setTimeout(() => {
        if (r) requestLog(r).debug(`lua sleep timer expired: "${r.uri}?${r.args}"`);
        resolve(undefined);
      }, delay)));
      // a killed thread's sleep goes with it (OpenResty's sleep cleanup)
      return bridge.suspend(expired, undefined, () => clearTimeout(timer));
    },
    flush(L: number) {
      const ctx = requestContext(rt, 1, C_REFUSED);
      const ok = (L1: number) => (bridge.pushInteger(L1, 1), 1);
      if (rawOutput(ctx.r)) return refuseRaw(L);
      if (headerOnly(ctx.r)) {
        bridge.pushNil(L);
        bridge.pushString(L, 'header only');
        return 2;
      }
      if (ctx.eof || ctx.r.finished) return ok(L);
      if (buffering(ctx.r)) {
        bridge.pushNil(L);
        bridge.pushString(L, 'buffering');
        return 2;
      }
      const waitAsked = bridge.toBoolean(L, 1);
      if (!somethingToFlush(ctx.r, waitAsked)) {
        bridge.pushNil(L);
        bridge.pushString(L, 'nothing to flush');
        return 2;
      }
      const wait = flushOutput(ctx.r, true);
      // ngx.flush(true) waits until the client took it all
      if (wait && waitAsked) return bridge.suspend(wait, ok);
      return ok(L);
    },
    /** ngx.send_headers(): the head goes to the filters now and is held with the output (1). */
    send_headers(L: number) {
      const ctx = requestContext(rt, 1, C_REFUSED);
      const ok = (L1: number) => (bridge.pushInteger(L1, 1), 1);
      const wait = headStarted(ctx.r) ? undefined : startHead(ctx.r);
      return wait ? bridge.suspend(wait, ok) : ok(L);
    },
    /** ngx.headers_sent (read through the ngx table's metatable). */
    headers_sent(L: number) {
      bridge.pushBoolean(L, headStarted(requestContext(rt, 2).r));
      return 1;
    },
    /** ngx.is_subrequest (read through the ngx table's metatable). */
    is_subrequest(L: number) {
      bridge.pushBoolean(L, requestContext(rt, 2).r.parent !== undefined);
      return 1;
    },
    eof(L: number) {
      const ctx = requestContext(rt, 1, ['timer']);
      // (OpenResty answers this before it checks the context)
      if (rawOutput(ctx.r)) return refuseRaw(L);
      refuseIn(ctx, ['set', 'log', 'header_filter', 'body_filter']);
      if (ctx.eof) {
        bridge.pushNil(L);
        bridge.pushString(L, 'seen eof');
        return 2;
      }
      ctx.eof = true;
      const ok = (L1: number) => (bridge.pushInteger(L1, 1), 1);
      const wait = finishOutput(ctx.r);
      // the client has it all, but the request (its log phase, the connection) waits for the hook's end
      if (!ctx.r.parent && ctx.r.sink.holdFinish) {
        ctx.r.sink.holdFinish(new Promise<void>((resolve) => (ctx.releaseFinish = resolve)));
      }
      return wait ? bridge.suspend(wait, ok) : ok(L);
    },
    get_phase(L: number) {
      return ret(L, currentContext(rt)?.phase ?? 'init');
    },
    escape_uri(L: number) {
      const s = bridge.type(L, 1) === T.NIL || bridge.type(L, 1) === T.NONE ? '' : str(L, 1, 'escape_uri');
      const t = bridge.type(L, 2);
      if (t === T.NIL || t === T.NONE) return ret(L, escapeUriComponent(s));
      const type = bridge.toNumber(L, 2);
      if (t !== T.NUMBER || type === undefined) throw new LuaError('"type" is not a number', 0);
      if (type < 0 || type > 6) throw new LuaError(`"type" ${bridge.toString(L, 2)} out of range`, 0);
      return ret(L, type === 2 ? escapeUriComponent(s) : escapeAs(Math.trunc(type), s));
    },
    unescape_uri: (L: number) => ret(L, unescapeArg(str(L, 1, 'unescape_uri'))),
    encode_args(L: number) {
      if (bridge.type(L, 1) !== T.TABLE) throw new LuaError(`bad argument #1 to 'encode_args' (table expected, got ${bridge.typeName(L, 1)})`);
      const parts: string[] = [];
      const add = (k: string, vi: number) => {
        const t = bridge.type(L, vi);
        if (t === T.BOOLEAN) {
          if (bridge.toBoolean(L, vi)) parts.push(escapeUriComponent(k));
        } else if (t === T.STRING || t === T.NUMBER) {
          parts.push(`${escapeUriComponent(k)}=${escapeUriComponent(bridge.toString(L, vi)!)}`);
        } else throw new LuaError(`attempt to use ${bridge.typeName(L, vi)} as query arg value`);
      };
      api.lua_pushnil(L);
      while (api.lua_next(L, 1)) {
        const key = bridge.toString(L, -2);
        if (key === undefined || bridge.type(L, -2) !== T.STRING) throw new LuaError(`attempt to use a ${bridge.typeName(L, -2)} key in the query args table`);
        if (bridge.type(L, -1) === T.TABLE) {
          const n = api.lua_rawlen(L, -1);
          for (let i = 1; i <= n; i++) {
            api.lua_rawgeti(L, -1, BigInt(i));
            add(key, api.lua_gettop(L));
            api.lua_settop(L, -2);
          }
        } else add(key, api.lua_gettop(L));
        api.lua_settop(L, -2);
      }
      return ret(L, parts.join('&'));
    },
    md5: (L: number) => ret(L, crypto.createHash('md5').update(bin(L, 1, 'md5')).digest('hex')),
    md5_bin: (L: number) => ret(L, crypto.createHash('md5').update(bin(L, 1, 'md5_bin')).digest().toString('latin1')),
    sha1_bin: (L: number) => ret(L, crypto.createHash('sha1').update(bin(L, 1, 'sha1_bin')).digest().toString('latin1')),
    hmac_sha1: (L: number) => ret(L, crypto.createHmac('sha1', bin(L, 1, 'hmac_sha1')).update(bin(L, 2, 'hmac_sha1')).digest().toString('latin1')),
    crc32_short: (L: number) => (bridge.pushInteger(L, zlib.crc32(bin(L, 1, 'crc32_short'))), 1),
    crc32_long: (L: number) => (bridge.pushInteger(L, zlib.crc32(bin(L, 1, 'crc32_long'))), 1),
    encode_base64(L: number) {
      // lua-resty-core's: nil and false are "", true is "true" (other types are refused here)
      const t = bridge.type(L, 1);
      const input = t === T.NIL || t === T.NONE || t === T.BOOLEAN
        ? Buffer.from(bridge.toBoolean(L, 1) ? 'true' : '', 'latin1') : bin(L, 1, 'encode_base64');
      const noPad = bridge.type(L, 2);
      if (noPad !== T.NIL && noPad !== T.NONE && noPad !== T.BOOLEAN) throw new LuaError(`bad no_padding: boolean expected, got ${bridge.typeName(L, 2)}`);
      const s = input.toString('base64');
      return ret(L, bridge.toBoolean(L, 2) ? s.replace(/=+$/, '') : s);
    },
    decode_base64(L: number) {
      if (bridge.type(L, 1) !== T.STRING) throw new LuaError('string argument only');
      const s = str(L, 1, 'decode_base64');
      const bytes = ngxDecodeBase64(s);
      if (bytes === undefined) {
        bridge.pushNil(L);
        return 1;
      }
      return ret(L, bytes.toString('latin1'));
    },
    quote_sql_str: (L: number) => ret(L, quoteSql(str(L, 1, 'quote_sql_str'))),
  };
}

export function timeLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  const ret = (L: number, s: string) => (bridge.pushString(L, s), 1);
  const seconds = (L: number, fn: string): number => {
    const n = bridge.toNumber(L, 1);
    if (n === undefined) throw new LuaError(`bad argument #1 to '${fn}' (number expected, got ${bridge.typeName(L, 1)})`);
    return Math.floor(n);
  };
  return {
    time: (L: number) => (bridge.pushInteger(L, Math.floor(Date.now() / 1000)), 1),
    now: (L: number) => (bridge.pushNumber(L, Math.floor(Date.now()) / 1000), 1),
    update_time: () => 0,
    today: (L: number) => ret(L, localDate(new Date())),
    localtime(L: number) {
      const d = new Date();
      return ret(L, `${localDate(d)} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`);
    },
    utctime(L: number) {
      const iso = new Date().toISOString();
      return ret(L, `${iso.slice(0, 10)} ${iso.slice(11, 19)}`);
    },
    http_time: (L: number) => ret(L, new Date(seconds(L, 'http_time') * 1000).toUTCString()),
    cookie_time: (L: number) => ret(L, cookieTime(seconds(L, 'cookie_time'))),
    parse_http_time(L: number) {
      const ms = Date.parse(bridge.toString(L, 1) ?? '');
      if (Number.isNaN(ms)) bridge.pushNil(L);
      else bridge.pushInteger(L, Math.floor(ms / 1000));
      return 1;
    },
  };
}

export function configLibrary(rt: LuaRuntime, prefix: string): Record<string, unknown> {
  const { bridge } = rt.vm;
  return {
    subsystem: 'http',
    ngx_lua_version: 10023,
    nginx_version: 1022001,
    debug: false,
    prefix: (L: number) => (bridge.pushString(L, prefix), 1),
    configure: (L: number) => (bridge.pushString(L, ''), 1),
  };
}

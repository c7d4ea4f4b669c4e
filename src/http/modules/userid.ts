/**
 * ngx_http_userid_filter_module: identifies clients by a cookie. `userid
 * on|v1` sets one (`Set-Cookie` in the header filter, for the client's
 * request only) when the client sent none, or when `$uid_reset` asks for a
 * new one, or to add a missing `userid_mark`; `log` only reads it; `off`
 * neither. `$uid_got` / `$uid_set` are `name=` and the four 32-bit words of
 * the identifier in hex.
 *
 * The identifier is nginx's, byte for byte: 16 bytes in base64 (22
 * characters and `==`, or the mark in place of the first `=`). Version 2
 * (`on`) holds, in network order, the service number (default: the server's
 * IPv4 address, the last 4 bytes of an IPv6 one, 0 on a unix socket), the
 * time, a per-worker start value and a sequence (from 0x03030302, by 0x100);
 * v1 holds the same fields in the host's (little-endian) order, the sequence
 * from 1. The variables print each 4-byte word as the host reads it, as
 * nginx's `%08XD` of its uint32_t array does. The start value is nginx's
 * (microseconds / 20) << 16 | pid, with the worker thread's id mixed into
 * the pid since workers here share one process.
 */
import { threadId } from 'node:worker_threads';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfContext, MergedConf } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import { setting, unique } from '../../conf/setters.ts';
import { enumOf, numberArg, parseTime } from '../../conf/values.ts';
import { addressBytes } from '../../core/inet.ts';
import { cookieTime } from '../../core/http-time.ts';
import { cookieValue } from '../core/variables.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { mainRequest } from '../subrequest.ts';

type Mode = 'off' | 'log' | 'v1' | 'on';

interface UseridConf {
  enable?: Mode;
  service?: number;
  name?: string;
  /** `; domain=…`, or '' */
  domain?: string;
  /** `; path=…` */
  path?: string;
  p3p?: string;
  /** Seconds; 0 for none, MAX_EXPIRES for `max`. */
  expires?: number;
  /** The mark character, or '' for none. */
  mark?: string;
  /** `userid_flags` values given. */
  flags?: string[];
}

const USERID_DEFAULTS = { enable: 'off' as Mode, name: 'uid', domain: '', path: '; path=/', p3p: '', expires: 0, mark: '', flags: [] as string[] };

const useridSlot = defineSlot<UseridConf, typeof USERID_DEFAULTS>('userid', () => ({}), inheritUnset, USERID_DEFAULTS);

type UidConf = MergedConf<typeof useridSlot>;

/** 31 Dec 2037 23:55:55 GMT, written as a fixed string. */
const MAX_EXPIRES = 2145916555;
const MAX_EXPIRES_TEXT = '; expires=Thu, 31-Dec-37 23:55:55 GMT';

/** The flags in the order nginx appends them. */
const FLAG_TEXT: Record<string, string> = {
  secure: '; secure', httponly: '; httponly', 'samesite=strict': '; samesite=strict', 'samesite=lax': '; samesite=lax', 'samesite=none': '; samesite=none',
};

const FLAG_ORDER = Object.keys(FLAG_TEXT);

/** Per worker, as nginx's per-process statics. */
const startValue = ((Math.floor((Number(process.hrtime.bigint() / 1000n) % 1_000_000) / 20) << 16) | ((process.pid ^ threadId) & 0xffff)) >>> 0;
let sequencerV1 = 1;
let sequencerV2 = 0x03030302;

interface UidState {
  /** The cookie's value as sent, when there was one. */
  cookie: string | undefined;
  got: Buffer | undefined;
  set: Buffer | undefined;
  /** A new identifier replaces the one sent ($uid_reset). */
  reset: boolean;
  created: boolean;
}

const UID = {};

/** The client's identifier, read once per request (ngx_http_userid_get_uid). */
function uidState(r: HttpRequest, conf: UidConf): UidState {
  let st = r.ctx.get(UID) as UidState | undefined;
  if (st) return st;
  st = { cookie: undefined, got: undefined, set: undefined, reset: false, created: false };
  r.ctx.set(UID, st);
  const value = cookieValue(r, conf.name);
  if (value === undefined) return st;
  st.cookie = value;
  if (value.length < 22) {
    requestLog(r).error(`client sent too short userid cookie "${value}"`);
    return st;
  }
  const src = value.slice(0, 22);
  if (!/^[A-Za-z0-9+/]{22}$/.test(src)) {
    requestLog(r).error(`client sent invalid userid cookie "${value}"`);
    return st;
  }
  st.got = Buffer.from(src, 'base64');
  return st;
}

function word(b: Buffer | undefined, i: number): number {
  return b ? b.readUInt32LE(i * 4) : 0;
}

/** The identifier to send, made once (ngx_http_userid_create_uid); undefined when none is sent. */
function createUid(r: HttpRequest, st: UidState, conf: UidConf): Buffer | undefined {
  if (st.created) return st.set;
  st.created = true;
  if (st.got && word(st.got, 3) !== 0) {
    const reset = r.main.variables.valueByName(r, 'uid_reset') ?? '';
    if (reset === '' || reset === '0') {
      const cookie = st.cookie!;
      if (conf.mark === '' || (cookie.length > 23 && cookie[22] === conf.mark && cookie[23] === '=')) return undefined;
      st.set = st.got;
      return st.set;
    }
    st.reset = true;
    if (reset === 'log') {
      const hex = [0, 1, 2, 3].map((i) => hex8(word(st.got, i))).join('');
      requestLog(r).notice(`userid cookie "${conf.name}=${hex}" was reset`);
    }
  }
  const uid = Buffer.alloc(16);
  const now = Math.floor(Date.now() / 1000);
  if (conf.enable === 'v1') {
    uid.writeUInt32LE((conf.service ?? 0) >>> 0, 0);
    uid.writeUInt32LE(now >>> 0, 4);
    uid.writeUInt32LE(startValue, 8);
    uid.writeUInt32LE(sequencerV1 >>> 0, 12);
    sequencerV1 = (sequencerV1 + 0x100) >>> 0;
  } else {
    if (conf.service !== undefined) uid.writeUInt32BE(conf.service >>> 0, 0);
    else {
      const addr = addressBytes(r.conn.localAddress);
      if (addr) uid.set(addr.subarray(addr.length - 4), 0);
    }
    uid.writeUInt32BE(now >>> 0, 4);
    uid.writeUInt32BE(startValue, 8);
    uid.writeUInt32BE(sequencerV2, 12);
    sequencerV2 = (sequencerV2 + 0x100) >>> 0;
    if (sequencerV2 < 0x03030302) sequencerV2 = 0x03030302;
  }
  st.set = uid;
  return uid;
}

function hex8(n: number): string {
  return n.toString(16).toUpperCase().padStart(8, '0');
}

function uidText(name: string, uid: Buffer): string {
  return `${name}=${hex8(word(uid, 0))}${hex8(word(uid, 1))}${hex8(word(uid, 2))}${hex8(word(uid, 3))}`;
}

function useridHeaderFilter(r: HttpRequest): void {
  const conf = r.level.get(useridSlot);
  if (conf.enable !== 'on' && conf.enable !== 'v1') return;
  const st = uidState(r, conf);
  const uid = createUid(r, st, conf);
  if (!uid) return;
  let value = `${conf.name}=`;
  if (!st.got || word(st.got, 3) === 0 || st.reset) {
    const b64 = uid.toString('base64');
    value += conf.mark ? b64.slice(0, 22) + conf.mark + '=' : b64;
  } else {
    value += st.cookie!.slice(0, 22) + conf.mark + '=';
  }
  if (conf.expires === MAX_EXPIRES) value += MAX_EXPIRES_TEXT;
  else if (conf.expires) value += '; expires=' + cookieTime(Math.floor(Date.now() / 1000) + conf.expires);
  value += conf.domain + conf.path;
  for (const f of FLAG_ORDER) if (conf.flags.includes(f)) value += FLAG_TEXT[f];
  r.addHeader('Set-Cookie', value);
  if (conf.p3p) r.addHeader('P3P', conf.p3p);
}

function gotVariable(r: HttpRequest): string | undefined {
  const m = mainRequest(r);
  const conf = m.level.get(useridSlot);
  if (conf.enable === 'off') return undefined;
  const st = uidState(m, conf);
  return st.got && word(st.got, 3) !== 0 ? uidText(conf.name, st.got) : undefined;
}

function setVariable(r: HttpRequest): string | undefined {
  const m = mainRequest(r);
  const conf = m.level.get(useridSlot);
  if (conf.enable !== 'on' && conf.enable !== 'v1') return undefined;
  const uid = createUid(m, uidState(m, conf), conf);
  return uid ? uidText(conf.name, uid) : undefined;
}

/** `userid_domain none` and `userid_p3p none` mean nothing is sent. */
function noneOr(prefix: string) {
  return (_cf: ConfContext, v: string): string => (v === 'none' ? '' : prefix + v);
}

export const useridModule: HttpModule = {
  name: 'ngx_http_userid_filter_module',
  directives: [
    { name: 'userid', contexts: HTTP_ANY, args: 1, handler: setting(useridSlot, 'enable', enumOf(['off', 'log', 'v1', 'on'])) },
    {
      name: 'userid_service', contexts: HTTP_ANY, args: 1,
      handler: setting(useridSlot, 'service', numberArg),
    },
    { name: 'userid_name', contexts: HTTP_ANY, args: 1, handler: setting(useridSlot, 'name', (_cf, v) => v) },
    { name: 'userid_domain', contexts: HTTP_ANY, args: 1, handler: setting(useridSlot, 'domain', noneOr('; domain=')) },
    { name: 'userid_path', contexts: HTTP_ANY, args: 1, handler: setting(useridSlot, 'path', (_cf, v) => `; path=${v}`) },
    { name: 'userid_p3p', contexts: HTTP_ANY, args: 1, handler: setting(useridSlot, 'p3p', noneOr('')) },
    {
      name: 'userid_expires', contexts: HTTP_ANY, args: 1,
      handler: unique(useridSlot, 'expires', (_cf, node, c) => {
        const v = node.args[0];
        if (v === 'max') c.expires = MAX_EXPIRES;
        else if (v === 'off') c.expires = 0;
        else {
          const sec = parseTime(v, true);
          if (Number.isNaN(sec) || sec < 0) return 'invalid value';
          c.expires = sec;
        }
        return undefined;
      }),
    },
    {
      // ngx_conf_set_bitmask_slot: lines add up, a value given again is warned about; `off` alone means none
      name: 'userid_flags', contexts: HTTP_ANY, args: [1, 3],
      handler(cf, node) {
        const c = cf.get(useridSlot);
        const seen = new Set(Object.hasOwn(c, 'flags') ? c.flags : []);
        for (const a of node.args) {
          if (a !== 'off' && !(a in FLAG_TEXT)) throw cf.error(`invalid value "${a}"`);
          if (seen.has(a)) cf.warn(`duplicate value "${a}"`);
          seen.add(a);
        }
        c.flags = [...seen];
        return undefined;
      },
    },
    {
      name: 'userid_mark', contexts: HTTP_ANY, args: 1,
      handler: unique(useridSlot, 'mark', (_cf, node, c) => {
        const v = node.args[0];
        if (v === 'off') c.mark = '';
        else if (v.length !== 1 || !/[0-9A-Za-z=]/.test(v)) return 'value must be "off" or a single letter, digit or "="';
        else c.mark = v;
        return undefined;
      }),
    },
  ],
  variables: [
    { name: 'uid_got', get: gotVariable },
    { name: 'uid_set', get: setVariable },
    // set by `set` or `map`; empty (or 0) keeps the client's identifier
    { name: 'uid_reset', get: () => '', changeable: true },
  ],
  postconfiguration(http) {
    // nginx's userid filter position (see http-conf.ts): after headers (500)
    http.addHeaderFilter(600, useridHeaderFilter);
  },
};

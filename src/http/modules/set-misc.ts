/**
 * ngx_http_set_misc_module (OpenResty's set-misc-nginx-module): `set`-like
 * directives that assign a transformed value to a variable as steps of the
 * rewrite module's program, in order with `set`, `if` and `rewrite`:
 * escaping and quoting, digests, base64/hex, `set_if_empty`, `set_random`,
 * `set_hashed_upstream` over an `upstream_list`, `set_local_today`. With
 * one argument the variable's own value is transformed in place.
 * `load_module ngx_http_set_misc_module.so` (and ndk_http_module) is
 * accepted as built in.
 */
import crypto from 'node:crypto';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { setting } from '../../conf/setters.ts';
import { flagArg } from '../../conf/values.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpModule, HttpMainConf } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { mainErrorLog } from '../../core/error-log.ts';
import { program, setTarget } from './rewrite.ts';
import { NEXT } from './rewrite/program.ts';
import { escapeUriComponent } from '../uri.ts';
import { ngxDecodeBase64 } from '../../core/base64.ts';

type Value = ComplexValue<HttpRequest>;
/** A transformation: the new value, or undefined when the input is bad (the error is logged, the value empty). */
/** r is undefined for ndk.set_var in a Lua timer (no request: the defaults, the worker's log). */
type Transform = (r: HttpRequest | undefined, args: string[]) => string | undefined;

const logOf = (r: HttpRequest | undefined) => (r ? requestLog(r) : mainErrorLog());

const IN_REWRITE = Ctx.SERVER | Ctx.SIF | Ctx.LOCATION | Ctx.LIF;

/** `%XX` decoded and `+` as a space; a bad escape stays as it is. */
function unescapeUri(s: string): string {
  return s.replace(/\+/g, ' ').replace(/%([0-9a-fA-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/** MySQL's quoting: the value in single quotes with \0 \b \n \r \t \Z ' " \ escaped. */
function quoteSql(s: string): string {
  const map: Record<string, string> = { '\0': '\\0', '\b': '\\b', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\x1a': '\\Z', "'": "\\'", '"': '\\"', '\\': '\\\\' };
  return `'${s.replace(/[\0\b\n\r\t\x1a'"\\]/g, (c) => map[c])}'`;
}

/** A JSON string: quotes, backslash and control characters escaped. */
function quoteJson(s: string): string {
  const map: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' };
  // eslint-disable-next-line no-control-regex
  return `"${s.replace(/["\\\x00-\x1f]/g, (c) => map[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}"`;
}

const digest = (alg: string) => (_r: HttpRequest | undefined, [v]: string[]) => crypto.createHash(alg).update(v, 'latin1').digest('hex');

function decodeBase64(r: HttpRequest | undefined, s: string): string | undefined {
  const bytes = ngxDecodeBase64(s);
  if (bytes === undefined) logOf(r).error('set_decode_base64: invalid value');
  return bytes?.toString('latin1');
}

function decodeHex(r: HttpRequest | undefined, s: string): string | undefined {
  if (s.length % 2 || !/^[0-9a-fA-F]*$/.test(s)) {
    logOf(r).error('set_decode_hex: invalid value');
    return undefined;
  }
  return Buffer.from(s, 'hex').toString('latin1');
}

/** set_base32_alphabet and set_base32_padding (defaults `0-9a-v` and on). */
const BASE32_DEFAULTS = { alphabet: '0123456789abcdefghijklmnopqrstuv', padding: true };
const base32Loc = defineSlot<{ alphabet?: string; padding?: boolean }, { alphabet: string; padding: boolean }>('set_misc_base32',
  () => ({}), inheritUnset, BASE32_DEFAULTS);

const base32Of = (r: HttpRequest | undefined) => (r ? r.level.get(base32Loc) : BASE32_DEFAULTS);

function encodeBase32(r: HttpRequest | undefined, s: string): string {
  const { alphabet: BASE32, padding } = base32Of(r);
  let out = '';
  for (let i = 0; i < s.length; i += 5) {
    const block = s.slice(i, i + 5);
    let bits = 0n;
    for (let j = 0; j < 5; j++) bits = (bits << 8n) | BigInt(j < block.length ? block.charCodeAt(j) : 0);
    const chars = Math.ceil((block.length * 8) / 5);
    for (let j = 0; j < 8; j++) out += j < chars ? BASE32[Number((bits >> BigInt(35 - j * 5)) & 31n)] : padding ? '=' : '';
  }
  return out;
}

function decodeBase32(r: HttpRequest | undefined, s: string): string | undefined {
  const BASE32 = base32Of(r).alphabet;
  const text = s.replace(/=+$/, '');
  let out = '';
  let acc = 0;
  let n = 0;
  for (const ch of text) {
    const v = BASE32.indexOf(ch);
    if (v < 0) {
      logOf(r).error('set_decode_base32: invalid value');
      return undefined;
    }
    acc = (acc << 5) | v;
    n += 5;
    if (n >= 8) {
      n -= 8;
      out += String.fromCharCode((acc >> n) & 255);
    }
  }
  return out;
}

const hmac = (alg: string) => (_r: HttpRequest | undefined, [secret, v]: string[]) =>
  crypto.createHmac(alg, Buffer.from(secret, 'latin1')).update(v, 'latin1').digest().toString('latin1');

function randomOf(alphabet: string) {
  return (r: HttpRequest | undefined, [count]: string[]): string | undefined => {
    const n = Number(count);
    if (!/^\d+$/.test(count) || n < 1 || n > 64) {
      logOf(r).error(`set_secure_random: bad length "${count}"`);
      return undefined;
    }
    const bytes = crypto.randomBytes(n);
    let out = '';
    for (const b of bytes) out += alphabet[b % alphabet.length];
    return out;
  };
}

/** PostgreSQL's quoting as set-misc writes it: MySQL's escapes in E'…', each byte from 0x80 as `\\ooo` (empty: ''). */
function quotePgsql(s: string): string {
  if (s === '') return "''";
  // quoteSql leaves bytes from 0x80 alone
  return 'E' + quoteSql(s).replace(/[\x80-\xff]/g, (c) => '\\\\' + c.charCodeAt(0).toString(8));
}

/** strftime(3) for the conversions set_formatted_*_time configurations use. */
function strftime(format: string, d: Date, utc: boolean): string {
  const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
  const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
  const get = (name: 'FullYear' | 'Month' | 'Date' | 'Hours' | 'Minutes' | 'Seconds' | 'Day') =>
    (d[`get${utc ? 'UTC' : ''}${name}`] as () => number).call(d);
  const p2 = (n: number) => String(n).padStart(2, '0');
  const offset = utc ? 0 : -d.getTimezoneOffset();
  return format.replace(/%([a-zA-Z%])/g, (m, c: string) => {
    switch (c) {
      case 'a': return DAYS[get('Day')].slice(0, 3);
      case 'A': return DAYS[get('Day')];
      case 'b': case 'h': return MONTHS[get('Month')].slice(0, 3);
      case 'B': return MONTHS[get('Month')];
      case 'd': return p2(get('Date'));
      case 'e': return String(get('Date')).padStart(2, ' ');
      case 'H': return p2(get('Hours'));
      case 'M': return p2(get('Minutes'));
      case 'S': return p2(get('Seconds'));
      case 'm': return p2(get('Month') + 1);
      case 'y': return p2(get('FullYear') % 100);
      case 'Y': return String(get('FullYear'));
      case 'Z': return utc ? 'GMT' : Intl.DateTimeFormat('en', { timeZoneName: 'short' }).formatToParts(d).find((x) => x.type === 'timeZoneName')?.value ?? '';
      case 'z': return (offset < 0 ? '-' : '+') + p2(Math.floor(Math.abs(offset) / 60)) + p2(Math.abs(offset) % 60);
      case 's': return String(Math.floor(d.getTime() / 1000));
      case '%': return '%';
      default: return m;
    }
  });
}

/** upstream_list lists, by http block. */
const upstreamLists = new WeakMap<HttpMainConf, Map<string, string[]>>();

/** nginx's ngx_hash_key_lc: the hash set_hashed_upstream picks with (modulo the list's length). */
function hashKeyLc(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (Math.imul(h, 31) + s.toLowerCase().charCodeAt(i)) >>> 0;
  return h;
}

function localToday(): string {
  const d = new Date();
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
}

/**
 * A directive `name $var [value …]`: `inputs` values (with variables) after the variable; when
 * `inPlace` and none is given, the variable's own value is the input.
 */
/**
 * The directives ndk.set_var.NAME gives Lua: as NDK's ndk_set_var_value
 * ones, those of one input that may transform a variable in place.
 */
export const ndkSetVar = new Map<string, Transform>();

function setter(name: string, inputs: number, transform: Transform, inPlace = true): Directive {
  if (inputs === 1 && inPlace) ndkSetVar.set(name, transform);
  return {
    name, contexts: IN_REWRITE, args: inPlace ? [1, 1 + inputs] : 1 + inputs,
    handler(cf, node) {
      const vars = httpMainOf(cf).variables;
      const [target, ...rest] = node.args;
      const index = setTarget(cf, target);
      // set_if_empty reads the variable and its fallback; the others their inputs, or the variable itself
      const inputsOf = name === 'set_if_empty' ? node.args : rest.length || !inPlace ? rest : [target];
      const values: Value[] = inputsOf.map((a) => compileComplex(cf, vars, a) as Value);
      program(cf).push((r) => {
        const got = transform(r, values.map((v) => v.evaluate(r)));
        vars.assign(r, index, got ?? '');
        return NEXT;
      });
    },
  };
}

function readUpstreamList(cf: ConfContext, args: string[]): void {
  const main = httpMainOf(cf);
  let lists = upstreamLists.get(main);
  if (!lists) upstreamLists.set(main, (lists = new Map()));
  lists.set(args[0], args.slice(1));
}

function hashedUpstream(cf: ConfContext, args: string[]): void {
  const main = httpMainOf(cf);
  const vars = main.variables;
  const [target, listName, key] = args;
  const listValue = compileComplex(cf, vars, listName) as Value;
  const keyValue = compileComplex(cf, vars, key) as Value;
  const index = setTarget(cf, target);
  program(cf).push((r) => {
    const name = listValue.evaluate(r);
    const list = upstreamLists.get(main)?.get(name);
    if (!list) {
      requestLog(r).error(`set_hashed_upstream: upstream list "${name}" not defined yet`);
      return 500;
    }
    vars.assign(r, index, list.length === 1 ? list[0] : list[hashKeyLc(keyValue.evaluate(r)) % list.length]);
    return NEXT;
  });
}

/** set_rotate $var [value] from to: the value plus one, back to `from` past `to`; not a number: `from`. */
function rotate(cf: ConfContext, args: string[]): void {
  const vars = httpMainOf(cf).variables;
  const [target, ...rest] = args;
  const index = setTarget(cf, target);
  const [valueArg, fromArg, toArg] = rest.length === 3 ? rest : [target, ...rest];
  const value = compileComplex(cf, vars, valueArg) as Value;
  const fromValue = compileComplex(cf, vars, fromArg) as Value;
  const toValue = compileComplex(cf, vars, toArg) as Value;
  program(cf).push((r) => {
    const from = Number(fromValue.evaluate(r));
    const to = Number(toValue.evaluate(r));
    const text = value.evaluate(r);
    let next = /^\d+$/.test(text) ? Number(text) + 1 : from;
    if (next > to || next < from) next = from;
    vars.assign(r, index, String(next));
    return NEXT;
  });
}

export const setMiscModule: HttpModule = {
  name: 'ngx_http_set_misc_module',
  directives: [
    setter('set_escape_uri', 1, (_r, [v]) => escapeUriComponent(v)),
    setter('set_unescape_uri', 1, (_r, [v]) => unescapeUri(v)),
    setter('set_quote_sql_str', 1, (_r, [v]) => quoteSql(v)),
    setter('set_quote_json_str', 1, (_r, [v]) => quoteJson(v)),
    setter('set_md5', 1, digest('md5')),
    setter('set_sha1', 1, digest('sha1')),
    setter('set_encode_base64', 1, (_r, [v]) => Buffer.from(v, 'latin1').toString('base64')),
    setter('set_decode_base64', 1, (r, [v]) => decodeBase64(r, v)),
    setter('set_encode_hex', 1, (_r, [v]) => Buffer.from(v, 'latin1').toString('hex')),
    setter('set_decode_hex', 1, (r, [v]) => decodeHex(r, v)),
    setter('set_quote_pgsql_str', 1, (_r, [v]) => quotePgsql(v)),
    setter('set_encode_base64url', 1, (_r, [v]) => Buffer.from(v, 'latin1').toString('base64url')),
    setter('set_decode_base64url', 1, (_r, [v]) => Buffer.from(v, 'base64url').toString('latin1')),
    setter('set_encode_base32', 1, (r, [v]) => encodeBase32(r, v)),
    setter('set_decode_base32', 1, (r, [v]) => decodeBase32(r, v)),
    setter('set_hmac_sha1', 2, hmac('sha1'), false),
    setter('set_hmac_sha256', 2, hmac('sha256'), false),
    setter('set_secure_random_alphanum', 1, randomOf('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'), false),
    setter('set_secure_random_lcalpha', 1, randomOf('abcdefghijklmnopqrstuvwxyz'), false),
    setter('set_formatted_gmt_time', 1, (_r, [f]) => strftime(f, new Date(), true), false),
    setter('set_formatted_local_time', 1, (_r, [f]) => strftime(f, new Date(), false), false),
    setter('set_if_empty', 1, (_r, [current, fallback]) => (current === '' ? fallback : current), false),
    setter('set_random', 2, (r, [from, to]) => {
      let lo = Number(from);
      let hi = Number(to);
      if (!/^\d+$/.test(from) || !/^\d+$/.test(to)) {
        logOf(r).error(`set_random: bad "from" or "to" argument: ${from} ${to}`);
        return undefined;
      }
      if (lo > hi) [lo, hi] = [hi, lo];
      return String(lo + Math.floor(Math.random() * (hi - lo + 1)));
    }, false),
    setter('set_local_today', 0, () => localToday(), false),
    {
      name: 'set_base32_padding', contexts: Ctx.HTTP | Ctx.SERVER | Ctx.SIF | Ctx.LOCATION | Ctx.LIF, args: 'flag',
      handler: setting(base32Loc, 'padding', flagArg),
    },
    {
      name: 'set_misc_base32_padding', contexts: Ctx.HTTP | Ctx.SERVER | Ctx.SIF | Ctx.LOCATION | Ctx.LIF, args: 'flag',
      handler(cf, node) {
        cf.warn('the "set_misc_base32_padding" directive is deprecated, use the "set_base32_padding" directive instead');
        return setting(base32Loc, 'padding', flagArg)(cf, node);
      },
    },
    {
      name: 'set_base32_alphabet', contexts: Ctx.HTTP | Ctx.SERVER | Ctx.SIF | Ctx.LOCATION | Ctx.LIF, args: 1,
      handler(cf, node) {
        if (node.args[0].length !== 32) return '"set_base32_alphabet" directive: alphabet length must be 32';
        cf.get(base32Loc).alphabet = node.args[0];
      },
    },
    {
      name: 'set_rotate', contexts: IN_REWRITE, args: [3, 4],
      handler(cf, node) { rotate(cf, node.args); },
    },
    {
      name: 'upstream_list', contexts: Ctx.HTTP, args: [2, Infinity],
      handler(cf, node) { readUpstreamList(cf, node.args); },
    },
    {
      name: 'set_hashed_upstream', contexts: IN_REWRITE, args: 3,
      handler(cf, node) { hashedUpstream(cf, node.args); },
    },
  ],
};

/**
 * `log_format`: format strings compiled once into a function of the request
 * (ngx_http_log_compile_format), with nginx's three escapings of variable
 * values and its built-in log operations for times, status and byte counts.
 */
import type { HttpRequest } from '../../request.ts';
import { bodyBytesSent, bytesSent } from '../../request-bytes.ts';
import type { VariableRegistry } from '../../variables.ts';
import { timeIso8601, timeLocal } from '../core/variables.ts';

export type Escape = 'default' | 'json' | 'none';

/** nginx's built-in `combined` format. */
export const COMBINED_FORMAT = '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"';

/** A format string split into literal text and variable names. */
export type FormatPart = string | { variable: string };

export type Render = (r: HttpRequest) => string;

export interface LogFormat {
  name: string;
  escape: Escape;
  parts: FormatPart[];
  /** Set once the http block is read (variables may be defined after the format). */
  render?: Render;
}

function isNameChar(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x5f;
}

/**
 * Parses `[escape=...] string ...` (the arguments after the name); the
 * strings are concatenated. Throws nginx's message for a syntax error.
 */
export function parseFormat(args: string[]): { escape: Escape; parts: FormatPart[] } {
  let escape: Escape = 'default';
  let s = 0;
  if (args[0]?.startsWith('escape=')) {
    const v = args[0].slice(7);
    if (v !== 'default' && v !== 'json' && v !== 'none') throw new Error(`unknown log format escaping "${v}"`);
    escape = v;
    s = 1;
  }
  const parts: FormatPart[] = [];
  const literal = (text: string) => {
    const last = parts.length - 1;
    if (last >= 0 && typeof parts[last] === 'string') parts[last] += text;
    else parts.push(text);
  };
  for (; s < args.length; s++) {
    const a = args[s];
    let i = 0;
    while (i < a.length) {
      const start = i;
      if (a[i] !== '$') {
        while (i < a.length && a[i] !== '$') i++;
        literal(a.slice(start, i));
        continue;
      }
      if (++i === a.length) throw new Error(`invalid parameter "${a.slice(start)}"`);
      const bracket = a[i] === '{';
      if (bracket && ++i === a.length) throw new Error(`invalid parameter "${a.slice(start)}"`);
      const nameStart = i;
      while (i < a.length && isNameChar(a.charCodeAt(i))) i++;
      const name = a.slice(nameStart, i);
      if (bracket) {
        if (a[i] !== '}') throw new Error(`the closing bracket in "${a.slice(nameStart)}" variable is missing`);
        i++;
      }
      if (name === '') throw new Error(`invalid parameter "${a.slice(start)}"`);
      parts.push({ variable: name });
    }
  }
  return { escape, parts };
}

const HEX = '0123456789ABCDEF';

/** Bytes nginx's default escaping writes as `\xHH`: controls, `"`, `\`, DEL and everything above ASCII. */
function needsDefaultEscape(c: number): boolean {
  return c < 0x20 || c === 0x22 || c === 0x5c || c >= 0x7f;
}

/** ngx_http_log_escape: `"` becomes `\x22`, a control byte `\x1B`, and so on. */
export function escapeDefault(s: string): string {
  let i = 0;
  while (i < s.length && !needsDefaultEscape(s.charCodeAt(i))) i++;
  if (i === s.length) return s;
  let out = s.slice(0, i);
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!needsDefaultEscape(c)) {
      out += s[i];
    } else if (c <= 0xff) {
      out += '\\x' + HEX[c >> 4] + HEX[c & 15];
    } else {
      // not a byte string: escape the character's UTF-8 bytes
      const cp = s.codePointAt(i)!;
      if (cp > 0xffff) i++;
      for (const b of Buffer.from(String.fromCodePoint(cp), 'utf8')) out += '\\x' + HEX[b >> 4] + HEX[b & 15];
    }
  }
  return out;
}

const JSON_SHORT: Record<number, string> = { 0x0a: '\\n', 0x0d: '\\r', 0x09: '\\t', 0x08: '\\b', 0x0c: '\\f' };

/** ngx_escape_json: `\"`, `\\`, `\n`-style escapes, other controls as `\u001B`; bytes above ASCII as they are. */
export function escapeJson(s: string): string {
  let i = 0;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || c > 0xff) break;
  }
  if (i === s.length) return s;
  let out = s.slice(0, i);
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22 || c === 0x5c) out += '\\' + s[i];
    else if (c >= 0x20 && c <= 0xff) out += s[i];
    else if (c > 0xff) out += Buffer.from(s[i], 'utf8').toString('latin1');
    else out += JSON_SHORT[c] ?? '\\u00' + HEX[c >> 4] + HEX[c & 15];
  }
  return out;
}

let clockSecond = -1;
let clockLocal = '';
let clockIso = '';

/** nginx's cached log times, formatted once per second. */
function refreshClock(): void {
  const sec = Math.floor(Date.now() / 1000);
  if (sec === clockSecond) return;
  const d = new Date(sec * 1000);
  clockLocal = timeLocal(d);
  clockIso = timeIso8601(d);
  clockSecond = sec;
}

/**
 * nginx's built-in log operations (ngx_http_log_vars): values computed at
 * log time without the variable machinery, never escaped.
 */
const BUILTINS: Record<string, Render> = {
  pipe: (r) => (r.pipelined ? 'p' : '.'),
  time_local: () => { refreshClock(); return clockLocal; },
  time_iso8601: () => { refreshClock(); return clockIso; },
  msec: () => (Date.now() / 1000).toFixed(3),
  request_time: (r) => (Math.max(0, Date.now() - r.startMs) / 1000).toFixed(3),
  bytes_sent: (r) => String(bytesSent(r)),
  body_bytes_sent: (r) => String(bodyBytesSent(r)),
  request_length: (r) => String(r.requestLength),
};

/** Variables whose values never need escaping (numbers): only the "not found" rule applies. */
const PLAIN = new Set(['status', 'connection', 'connection_requests', 'remote_port', 'server_port', 'pid', 'msec']);

function variablePiece(vars: VariableRegistry, name: string, escape: Escape): Render {
  const builtin = BUILTINS[name];
  if (builtin) return builtin;
  // an unknown name is reported when the http block ends, as nginx does
  const index = vars.index(name);
  if (escape === 'json') return (r) => { const v = vars.value(r, index); return v === undefined ? '' : escapeJson(v); };
  if (escape === 'none') return (r) => vars.value(r, index) ?? '';
  if (PLAIN.has(name)) return (r) => vars.value(r, index) ?? '-';
  return (r) => { const v = vars.value(r, index); return v === undefined ? '-' : escapeDefault(v); };
}

/** Compiles a parsed format into one function of the request (without the newline). */
export function compileFormat(vars: VariableRegistry, parts: FormatPart[], escape: Escape): Render {
  const pieces: Array<string | Render> = parts.map((p) => (typeof p === 'string' ? p : variablePiece(vars, p.variable, escape)));
  if (pieces.length === 0) return () => '';
  if (pieces.length === 1) {
    const only = pieces[0];
    return typeof only === 'string' ? () => only : only;
  }
  return (r) => {
    let s = '';
    for (let i = 0; i < pieces.length; i++) {
      const p = pieces[i];
      s += typeof p === 'string' ? p : p(r);
    }
    return s;
  };
}

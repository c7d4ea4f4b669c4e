/**
 * `log_format` for http and stream: format strings compiled once into a
 * function of the request or session (ngx_http_log_compile_format,
 * ngx_stream_log_compile_format), with nginx's three escapings of variable
 * values. http adds its built-in log operations (LogOps) from its module.
 */
import type { VariableHost, VariableRegistry } from '../variables.ts';

export type Escape = 'default' | 'json' | 'none';

/** A format string split into literal text and variable names. */
export type FormatPart = string | { variable: string };

/** One log line (without its newline) for a request or session. */
export type Render<T> = (x: T) => string;

export interface LogFormat<T> {
  name: string;
  escape: Escape;
  parts: FormatPart[];
  /** Compiled when read; http's built-in `combined` on first use (its variables come later). */
  render?: Render<T>;
}

/**
 * Names a format resolves without the variable machinery: http's log
 * operations (ngx_http_log_vars). Stream logs have none.
 */
export interface LogOps<T> {
  /** Computed at log time, never escaped. */
  builtins: Record<string, Render<T>>;
  /** Variables whose values never need escaping (numbers): only the "not found" rule applies. */
  plain: ReadonlySet<string>;
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
function escapeJson(s: string): string {
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

function variablePiece<T extends VariableHost>(vars: VariableRegistry<T>, name: string, escape: Escape, ops: LogOps<T> | undefined): Render<T> {
  // own properties only: `$constructor` must not find Object.prototype's
  const builtin = ops && Object.hasOwn(ops.builtins, name) ? ops.builtins[name] : undefined;
  if (builtin) return builtin;
  // an unknown name is reported when the block ends, as nginx does
  const index = vars.index(name);
  if (escape === 'json') return (x) => { const v = vars.value(x, index); return v === undefined ? '' : escapeJson(v); };
  if (escape === 'none') return (x) => vars.value(x, index) ?? '';
  if (ops?.plain.has(name)) return (x) => vars.value(x, index) ?? '-';
  return (x) => { const v = vars.value(x, index); return v === undefined ? '-' : escapeDefault(v); };
}

/** Compiles a parsed format into one function of the request or session (without the newline). */
export function compileFormat<T extends VariableHost>(vars: VariableRegistry<T>, parts: FormatPart[], escape: Escape, ops?: LogOps<T>): Render<T> {
  const pieces: Array<string | Render<T>> = parts.map((p) => (typeof p === 'string' ? p : variablePiece(vars, p.variable, escape, ops)));
  if (pieces.length === 0) return () => '';
  if (pieces.length === 1) {
    const only = pieces[0];
    return typeof only === 'string' ? () => only : only;
  }
  return (x) => {
    let s = '';
    for (let i = 0; i < pieces.length; i++) {
      const p = pieces[i];
      s += typeof p === 'string' ? p : p(x);
    }
    return s;
  };
}

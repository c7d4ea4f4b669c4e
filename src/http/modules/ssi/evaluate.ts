/**
 * Values of SSI parameters: variables (SSI's own first, then the request's)
 * substituted and backslashes removed as nginx's
 * ngx_http_ssi_evaluate_string does.
 */
import type { HttpRequest } from '../../request.ts';
import type { SsiRun } from './context.ts';

/** Relative paths get the directory of the request's URI (include). */
export const ADD_PREFIX = 1;

/** SSI variables first (captures, set, include set=), then the request's (nginx's ngx_http_ssi_get_variable). */
export function ssiVariable(f: SsiRun, name: string): string | undefined {
  if (name.length === 1 && name >= '0' && name <= '9') {
    const i = name.charCodeAt(0) - 48;
    if (i < f.mctx.captures.length) return f.mctx.captures[i];
  }
  const v = f.mctx.variables.get(name);
  if (v !== undefined) return v;
  return requestVariable(f.r, name);
}

/**
 * A variable of the configuration by name: declared ones through the
 * request's cache, prefixed ones ($arg_x, $http_x) computed each time, as
 * nginx's ngx_http_get_variable does for names it has not indexed.
 */
function requestVariable(r: HttpRequest, name: string): string | undefined {
  const vars = r.main.variables;
  const def = vars.lookup(name);
  if (!def) return undefined;
  if (def.prefix) return def.get(r, name);
  return vars.valueByName(r, name);
}

function isNameChar(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x5f;
}

/** The directory part of the request's URI, for relative include paths. */
function uriPrefix(uri: string): string {
  return uri.slice(0, uri.lastIndexOf('/') + 1);
}

/**
 * A parameter value with its variables substituted and backslashes
 * removed before \ ' " $ (nginx's ngx_http_ssi_evaluate_string);
 * undefined after logging an error.
 */
export function evaluate(f: SsiRun, text: string, flags = 0): string | undefined {
  if (!text.includes('$')) {
    const prefix = flags & ADD_PREFIX && text[0] !== '/' ? uriPrefix(f.r.uri) : '';
    return prefix + unquote(text, 0, text.length).value;
  }
  const parts: string[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] !== '$') {
      const lit = unquote(text, i, text.length, true);
      parts.push(lit.value);
      i = lit.end;
      continue;
    }
    if (++i === text.length) return invalidVariable(f, text);
    let bracket = false;
    if (text[i] === '{') {
      bracket = true;
      if (++i === text.length) return invalidVariable(f, text);
    }
    const start = i;
    let end = -1;
    for (; i < text.length; i++) {
      if (text[i] === '}' && bracket) {
        end = i++;
        bracket = false;
        break;
      }
      if (!isNameChar(text.charCodeAt(i))) break;
    }
    const name = text.slice(start, end < 0 ? i : end).toLowerCase();
    if (bracket) {
      f.log.error(`the closing bracket in "${name}" variable is missing`);
      return undefined;
    }
    if (name === '') return invalidVariable(f, text);
    const v = ssiVariable(f, name);
    if (v !== undefined) parts.push(v);
  }
  let prefix = '';
  if (flags & ADD_PREFIX) {
    const first = parts.find((p) => p !== '');
    if (first !== undefined && first[0] !== '/') prefix = uriPrefix(f.r.uri);
  }
  return prefix + parts.join('');
}

function invalidVariable(f: SsiRun, text: string): undefined {
  f.log.error(`invalid variable name in "${text}"`);
  return undefined;
}

/** Literal text up to an unescaped `$` (with `stopAtDollar`): `\x` is `x` for \ ' " $, else kept as `\x`. */
function unquote(text: string, from: number, to: number, stopAtDollar = false): { value: string; end: number } {
  let out = '';
  let quoted = false;
  let i = from;
  for (; i < to; i++) {
    const ch = text[i];
    if (!quoted) {
      if (ch === '\\') { quoted = true; continue; }
      if (ch === '$' && stopAtDollar) break;
    } else {
      quoted = false;
      if (ch !== '\\' && ch !== '\'' && ch !== '"' && ch !== '$') out += '\\';
    }
    out += ch;
  }
  return { value: out, end: i };
}


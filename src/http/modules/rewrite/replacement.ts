/**
 * `rewrite regex replacement [last|break|redirect|permanent]`, with nginx's
 * rules (ngx_http_rewrite, ngx_http_script_regex_start/end_code):
 * - a replacement starting with `http://`, `https://` or `$scheme` redirects
 *   (302; `permanent` 301); the redirect is partly unescaped
 *   (NGX_UNESCAPE_REDIRECT);
 * - a `?` at the end drops the request's arguments; otherwise they are
 *   appended (after `&` when the replacement has its own `?`);
 * - an internal rewrite splits the result at its first literal `?` into URI
 *   and arguments; the new URI is used as is (not unescaped);
 * - captures copied into arguments or a redirect are escaped when the request
 *   line had `%` or `+` in its path (nginx's quoted_uri / plus_in_uri).
 */
import type { ConfContext } from '../../../conf/context.ts';
import { DECLINED } from '../../http-conf.ts';
import { compileHttpRegex, execRegex } from '../../regex.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { escapeArgs } from '../../uri.ts';
import type { VariableRegistry } from '../../../core/variables.ts';
import { NEXT, rewriteLogging, rewriteNotice } from './program.ts';
import type { Code } from './program.ts';

/** A piece of the replacement: literal text, a variable (by index) or a capture ($1..$9). */
type Piece = string | { index: number } | { capture: number };

interface Replacement {
  /** Pieces before the first literal `?` (all of them for a redirect). */
  uri: Piece[];
  /** Pieces after it, for an internal rewrite that sets arguments. */
  args: Piece[] | undefined;
  /** The replacement has a literal `?` (request arguments are then appended after `&`). */
  hasQuestion: boolean;
}

function parseReplacement(cf: ConfContext, vars: VariableRegistry, text: string, splitArgs: boolean): Replacement {
  const out: Replacement = { uri: [], args: undefined, hasQuestion: false };
  let pieces = out.uri;
  let lit = '';
  const flush = () => {
    if (lit) pieces.push(lit);
    lit = '';
  };
  for (let i = 0; i < text.length;) {
    const ch = text[i];
    if (ch === '?') {
      out.hasQuestion = true;
      if (splitArgs && out.args === undefined) {
        flush();
        out.args = [];
        pieces = out.args;
        i++;
        continue;
      }
    }
    if (ch !== '$') {
      lit += ch;
      i++;
      continue;
    }
    i++;
    const d = text.charCodeAt(i);
    if (d >= 0x31 && d <= 0x39) {
      flush();
      pieces.push({ capture: d - 0x30 });
      i++;
      continue;
    }
    let name = '';
    if (text[i] === '{') {
      const end = text.indexOf('}', i);
      if (end < 0) throw cf.error(`the closing bracket in "${text.slice(i + 1)}" variable is missing`);
      name = text.slice(i + 1, end);
      i = end + 1;
    } else {
      while (i < text.length && /[A-Za-z0-9_]/.test(text[i])) name += text[i++];
    }
    if (!name) throw cf.error('invalid variable name');
    flush();
    pieces.push({ index: vars.index(name) });
  }
  flush();
  return out;
}

/** nginx's quoted_uri / plus_in_uri: the request line's path had `%` or `+`. */
function quotedUri(r: HttpRequest): boolean {
  const target = r.requestUri;
  for (let i = 0; i < target.length; i++) {
    const c = target.charCodeAt(i);
    if (c === 0x3f /* ? */) return false;
    if (c === 0x25 /* % */ || c === 0x2b /* + */) return true;
  }
  return false;
}

function evaluate(r: HttpRequest, vars: VariableRegistry, pieces: Piece[], escapeCaptures: boolean): string {
  let s = '';
  for (const p of pieces) {
    if (typeof p === 'string') s += p;
    else if ('index' in p) s += vars.value(r, p.index) ?? '';
    else {
      const c = r.captures?.[p.capture] ?? '';
      s += escapeCaptures && c ? escapeArgs(c) : c;
    }
  }
  return s;
}

function hex(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  c |= 0x20;
  return c >= 0x61 && c <= 0x66 ? c - 0x57 : -1;
}

/**
 * ngx_unescape_uri with NGX_UNESCAPE_REDIRECT: `%XX` is decoded only into
 * printable characters above `%`; an escaped `?` ends the decoding, and the
 * rest is copied as is; a malformed escape loses its `%`.
 */
export function unescapeRedirect(s: string): string {
  if (!s.includes('%')) return s;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    if (ch === '?') return out + s.slice(i);
    if (ch !== '%') {
      out += ch;
      continue;
    }
    if (i + 1 >= s.length) break;
    if (hex(s.charCodeAt(i + 1)) < 0) {
      out += s[i + 1];
      i++;
      continue;
    }
    if (i + 2 >= s.length) break;
    const lo = hex(s.charCodeAt(i + 2));
    if (lo < 0) {
      i += 2;
      continue;
    }
    const decoded = hex(s.charCodeAt(i + 1)) * 16 + lo;
    if (decoded === 0x3f) return out + '?' + s.slice(i + 3);
    out += decoded > 0x25 && decoded < 0x7f ? String.fromCharCode(decoded) : s.slice(i, i + 3);
    i += 2;
  }
  return out;
}

/** Compiles one `rewrite` directive (its arguments) into a statement. */
export function compileRewrite(cf: ConfContext, vars: VariableRegistry, args: string[]): Code {
  const [pattern, rawReplacement, flag] = args;
  if (rawReplacement === '') throw cf.error('empty replacement');
  const re = compileHttpRegex(cf, vars, pattern);
  let replacement = rawReplacement;
  const addArgs = !replacement.endsWith('?');
  if (!addArgs) replacement = replacement.slice(0, -1);
  let status = 0;
  let last = false;
  let breakCycle = false;
  if (/^(https?:\/\/|\$scheme)/.test(replacement)) {
    status = 302;
    last = true;
  }
  if (flag !== undefined) {
    if (flag === 'last') last = true;
    else if (flag === 'break') { breakCycle = true; last = true; }
    else if (flag === 'redirect') { status = 302; last = true; }
    else if (flag === 'permanent') { status = 301; last = true; }
    else throw cf.error(`invalid parameter "${flag}"`);
  }
  const redirect = status !== 0;
  const rep = parseReplacement(cf, vars, replacement, !redirect);
  const usesCaptures = [...rep.uri, ...(rep.args ?? [])].some((p) => typeof p === 'object' && 'capture' in p);

  return (r) => {
    const subject = r.uri;
    if (!execRegex(r, re, subject)) {
      if (rewriteLogging(r)) rewriteNotice(r, `"${pattern}" does not match "${subject}"`);
      r.captures = undefined;
      return NEXT;
    }
    if (rewriteLogging(r)) rewriteNotice(r, `"${pattern}" matches "${subject}"`);
    const quoted = usesCaptures && quotedUri(r);
    r.internal = true;
    if (breakCycle) {
      r.validLocation = false;
      r.uriChanged = false;
    } else {
      r.uriChanged = true;
    }
    if (redirect) {
      let location = unescapeRedirect(evaluate(r, vars, rep.uri, quoted));
      if (addArgs && r.args) location += (rep.hasQuestion ? '&' : '?') + r.args;
      if (rewriteLogging(r)) rewriteNotice(r, `rewritten redirect: "${location}"`);
      r.location = location;
      return status;
    }
    const uri = evaluate(r, vars, rep.uri, false);
    if (rep.args !== undefined) {
      let newArgs = evaluate(r, vars, rep.args, quoted);
      if (addArgs && r.args) newArgs += '&' + r.args;
      r.args = newArgs;
    } else if (!addArgs) {
      r.args = '';
    }
    r.hasArgs = r.args !== '';
    if (rewriteLogging(r)) rewriteNotice(r, `rewritten data: "${uri}", args: "${r.args}"`);
    if (uri === '') {
      requestLog(r).error('the rewritten URI has a zero length');
      return 500;
    }
    r.uri = uri;
    return last ? DECLINED : NEXT;
  };
}

/**
 * Request-target handling as ngx_http_parse_request_line and
 * ngx_http_parse_complex_uri do it. Strings are byte strings (latin1): one
 * char per byte, so percent-decoded bytes survive unchanged.
 */

export interface RequestTarget {
  /** Host from an absolute-form target (`GET http://host/path`), lowercased. */
  host?: string;
  /** The path part, still encoded. */
  path: string;
  args: string;
  hasArgs: boolean;
}

/** Splits a request target into host (absolute form), path and query. */
export function parseTarget(target: string): RequestTarget | undefined {
  let rest = target;
  let host: string | undefined;
  const abs = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/.exec(rest);
  if (abs) {
    host = abs[1].replace(/^.*@/, '');
    rest = rest.slice(abs[0].length) || '/';
    if (rest[0] !== '/') rest = '/' + rest;
  } else if (rest[0] !== '/') {
    // `*` for OPTIONS and garbage alike: nginx answers 400
    return undefined;
  }
  const q = rest.indexOf('?');
  const path = q >= 0 ? rest.slice(0, q) : rest;
  return { host, path, args: q >= 0 ? rest.slice(q + 1) : '', hasArgs: q >= 0 };
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  c |= 0x20;
  if (c >= 97 && c <= 102) return c - 87;
  return -1;
}

/**
 * Decodes `%XX`, merges slashes (when asked), and resolves `.` and `..`
 * segments. Returns undefined when `..` climbs above the root (nginx: 400).
 */
export function normalizeUri(path: string, mergeSlashes: boolean): string | undefined {
  let decoded = path;
  if (path.includes('%')) {
    let out = '';
    for (let i = 0; i < path.length; i++) {
      const ch = path[i];
      if (ch === '%' && i + 2 < path.length + 0) {
        const hi = hexValue(path.charCodeAt(i + 1));
        const lo = hexValue(path.charCodeAt(i + 2));
        if (hi >= 0 && lo >= 0) {
          out += String.fromCharCode(hi * 16 + lo);
          i += 2;
          continue;
        }
        return undefined;
      }
      out += ch;
    }
    decoded = out;
  }
  if (!decoded.includes('/.') && !(mergeSlashes && decoded.includes('//'))) return decoded;
  const segs = decoded.split('/');
  const out: string[] = [];
  for (let i = 1; i < segs.length; i++) {
    const s = segs[i];
    const last = i === segs.length - 1;
    if (s === '.') { if (last) out.push(''); continue; }
    if (s === '..') {
      if (out.length === 0) return undefined;
      out.pop();
      if (last) out.push('');
      continue;
    }
    if (s === '' && mergeSlashes && !last) continue;
    out.push(s);
  }
  return '/' + out.join('/');
}

/** Bytes ngx_escape_uri escapes: `%00-%20`, `%7F-%FF` and these (NGX_ESCAPE_URI / NGX_ESCAPE_ARGS). */
const URI_UNSAFE = '"#%<>?\\^`{|}';
const ARGS_UNSAFE = URI_UNSAFE + '&+;';

function escapeTable(unsafe: string): Uint8Array {
  const t = new Uint8Array(256);
  for (let c = 0; c < 256; c++) t[c] = c <= 0x20 || c >= 0x7f || unsafe.includes(String.fromCharCode(c)) ? 1 : 0;
  return t;
}
const URI_TABLE = escapeTable(URI_UNSAFE);
const ARGS_TABLE = escapeTable(ARGS_UNSAFE);

function escapeWith(table: Uint8Array, s: string): string {
  let i = 0;
  while (i < s.length && !table[s.charCodeAt(i) & 0xff]) i++;
  if (i === s.length) return s;
  let out = s.slice(0, i);
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i) & 0xff;
    out += table[c] ? '%' + (c < 16 ? '0' : '') + c.toString(16).toUpperCase() : s[i];
  }
  return out;
}

/** Escapes a URI for a `Location` header or a redirect (ngx_escape_uri, NGX_ESCAPE_URI). */
export function escapeUri(uri: string): string {
  return escapeWith(URI_TABLE, uri);
}

/** Escapes a value put into a query string (ngx_escape_uri, NGX_ESCAPE_ARGS). */
export function escapeArgs(s: string): string {
  return escapeWith(ARGS_TABLE, s);
}

/**
 * Request-target handling as ngx_http_parse_request_line and
 * ngx_http_parse_complex_uri do it. Strings are byte strings (latin1): one
 * char per byte, so percent-decoded bytes survive unchanged.
 */

export interface RequestTarget {
  /** Host from an absolute-form target (`GET http://host/path`), as sent. */
  host?: string;
  /** The path part, still encoded. */
  path: string;
  args: string;
  hasArgs: boolean;
}

/**
 * Splits a request target that did not come through the request-line
 * parser (HTTP/2 `:path`) into host, path and query.
 */
export function parseTarget(target: string): RequestTarget | undefined {
  let rest = target;
  let host: string | undefined;
  const abs = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/.exec(rest);
  if (abs) {
    host = abs[1];
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

/** The decoded path and the arguments of a request target. */
export interface ParsedUri {
  uri: string;
  args: string;
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  c |= 0x20;
  if (c >= 97 && c <= 102) return c - 87;
  return -1;
}

const USUAL = new Uint8Array(256);
for (let c = 0x21; c < 256; c++) USUAL[c] = c === 0x7f || '#%+./?'.includes(String.fromCharCode(c)) ? 0 : 1;

const S_USUAL = 0;
const S_SLASH = 1;
const S_DOT = 2;
const S_DOT_DOT = 3;
const S_QUOTED = 4;
const S_QUOTED_SECOND = 5;

/**
 * ngx_http_parse_complex_uri: decodes `%XX`, merges slashes (when asked),
 * resolves `.` and `..`, and splits off the arguments (a `#` ends the path
 * and the arguments). `raw` is the target from its first `/` (or `?` for
 * `http://host?args`, `emptyPath`). Returns undefined where nginx answers
 * 400: a bad escape, `%00`, or `..` above the root.
 */
export function parseComplexUri(raw: string, mergeSlashes: boolean, emptyPath = false): ParsedUri | undefined {
  const out = Buffer.allocUnsafe(raw.length + 1);
  let u = 0;
  if (emptyPath) out[u++] = 0x2f;
  let state = S_USUAL;
  let quotedState = S_USUAL;
  let decoded = 0;
  let argsAt = -1;
  const end = raw.length;
  let ch = end > 0 ? raw.charCodeAt(0) & 0xff : 0;
  let p = 1;
  // back up over a "/.." segment to the previous slash (u points after the "..")
  const climb = (): boolean => {
    u -= 4;
    for (;;) {
      if (u < 0) return false;
      if (out[u] === 0x2f) { u++; return true; }
      u--;
    }
  };
  loop:
  while (p <= end) {
    switch (state) {
      case S_USUAL:
        if (USUAL[ch]) { out[u++] = ch; break; }
        switch (ch) {
          case 0x2f: state = S_SLASH; out[u++] = ch; break;
          case 0x25: quotedState = state; state = S_QUOTED; break;
          case 0x3f: argsAt = p; break loop;
          case 0x23: argsAt = -2; break loop;
          default: out[u++] = ch;
        }
        break;
      case S_SLASH:
        if (USUAL[ch]) { state = S_USUAL; out[u++] = ch; break; }
        switch (ch) {
          case 0x2f: if (!mergeSlashes) out[u++] = ch; break;
          case 0x2e: state = S_DOT; out[u++] = ch; break;
          case 0x25: quotedState = state; state = S_QUOTED; break;
          case 0x3f: argsAt = p; break loop;
          case 0x23: argsAt = -2; break loop;
          default: state = S_USUAL; out[u++] = ch;
        }
        break;
      case S_DOT:
        if (USUAL[ch]) { state = S_USUAL; out[u++] = ch; break; }
        switch (ch) {
          case 0x2f: state = S_SLASH; u--; break;
          case 0x2e: state = S_DOT_DOT; out[u++] = ch; break;
          case 0x25: quotedState = state; state = S_QUOTED; break;
          case 0x3f: u--; argsAt = p; break loop;
          case 0x23: u--; argsAt = -2; break loop;
          default: state = S_USUAL; out[u++] = ch;
        }
        break;
      case S_DOT_DOT:
        if (USUAL[ch]) { state = S_USUAL; out[u++] = ch; break; }
        switch (ch) {
          case 0x2f: case 0x3f: case 0x23:
            if (!climb()) return undefined;
            if (ch === 0x3f) { argsAt = p; break loop; }
            if (ch === 0x23) { argsAt = -2; break loop; }
            state = S_SLASH;
            break;
          case 0x25: quotedState = state; state = S_QUOTED; break;
          default: state = S_USUAL; out[u++] = ch;
        }
        break;
      case S_QUOTED: {
        const v = hexValue(ch);
        if (v < 0) return undefined;
        decoded = v;
        state = S_QUOTED_SECOND;
        break;
      }
      case S_QUOTED_SECOND: {
        const v = hexValue(ch);
        if (v < 0) return undefined;
        ch = decoded * 16 + v;
        // a decoded "%", "#" or "?" is a plain byte of the path; others take part in "/" and "." handling
        if (ch === 0x25 || ch === 0x23 || ch === 0x3f) { state = S_USUAL; out[u++] = ch; break; }
        if (ch === 0) return undefined;
        state = quotedState;
        continue loop;
      }
    }
    ch = p < end ? raw.charCodeAt(p) & 0xff : 0;
    p++;
  }
  if (argsAt === -1) {
    if (state === S_QUOTED || state === S_QUOTED_SECOND) return undefined;
    if (state === S_DOT) u--;
    else if (state === S_DOT_DOT && !climb()) return undefined;
  }
  const uri = out.toString('latin1', 0, u);
  if (argsAt < 0) return { uri, args: '' };
  // arguments run to the end, or to a "#"
  const hash = raw.indexOf('#', argsAt);
  return { uri, args: raw.slice(argsAt, hash < 0 ? end : hash) };
}

/**
 * The path and arguments of a request target: the target itself when it
 * needs no decoding (nginx keeps such a URI as sent), else parseComplexUri.
 */
export function parseUri(raw: string, complex: boolean, mergeSlashes: boolean, emptyPath = false): ParsedUri | undefined {
  if (complex || emptyPath) return parseComplexUri(raw, mergeSlashes, emptyPath);
  const q = raw.indexOf('?');
  if (q < 0) return { uri: raw, args: '' };
  return { uri: raw.slice(0, q), args: raw.slice(q + 1) };
}

/** For code paths without a parsed request line (HTTP/2): the decoded path, or undefined (400). */
export function normalizeUri(path: string, mergeSlashes: boolean): string | undefined {
  return parseComplexUri(path, mergeSlashes)?.uri;
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

/** Bytes NGX_ESCAPE_MEMCACHED escapes: controls, space and `%`. */
const MEMCACHED_TABLE = new Uint8Array(256).map((_, c) => (c <= 0x20 || c === 0x25 ? 1 : 0));

/** Escapes a memcached key (ngx_escape_uri, NGX_ESCAPE_MEMCACHED). */
export function escapeMemcachedKey(key: string): string {
  return escapeWith(MEMCACHED_TABLE, key);
}

/** Escapes a value put into a query string (ngx_escape_uri, NGX_ESCAPE_ARGS). */
export function escapeArgs(s: string): string {
  return escapeWith(ARGS_TABLE, s);
}

/** ngx.escape_uri and set_escape_uri (a URI component): all but letters, digits and `-._~!*'()` as %XX, as OpenResty 0.10.23. */
export function escapeUriComponent(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const keep = (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)
      || c === 0x2d || c === 0x2e || c === 0x5f || c === 0x7e || c === 0x21 || (c >= 0x27 && c <= 0x2a);
    out += keep ? s[i] : '%' + c.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

/** Percent-decoding as ngx_http_lua_unescape_uri does for arguments: `+` is a space, a bad `%` stays. */
export function unescapeArg(s: string, plus = true): string {
  if (!s.includes('%') && !(plus && s.includes('+'))) return s;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '+' && plus) out += ' ';
    else if (c === '%' && /^[0-9a-fA-F]{2}$/.test(s.slice(i + 1, i + 3))) {
      out += String.fromCharCode(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else out += c;
  }
  return out;
}

/** `a=1&b&c=` (ngx.decode_args, get_uri_args, request-validation's form bodies) as a flat list of key, value (a key without `=` has the value true); `max` 0 is no limit. */
export function parseArgs(s: string, max: number): { list: Array<string | boolean>; truncated: boolean } {
  const list: Array<string | boolean> = [];
  let count = 0;
  for (const part of s.split('&')) {
    if (part === '') continue;
    if (max > 0 && count >= max) return { list, truncated: true };
    const eq = part.indexOf('=');
    if (eq < 0) list.push(unescapeArg(part), true);
    else list.push(unescapeArg(part.slice(0, eq)), unescapeArg(part.slice(eq + 1)));
    count++;
  }
  return { list, truncated: false };
}

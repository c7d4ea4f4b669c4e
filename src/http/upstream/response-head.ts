/**
 * Parsing the upstream's status line and header fields with nginx's rules
 * (ngx_http_parse_status_line, ngx_http_parse_header_line with underscores
 * allowed, and the ngx_http_upstream_headers_in handlers): values trimmed of
 * spaces, LF or CRLF line ends, a name with control characters, a NUL in a
 * value or a folded line is an invalid header (502); a duplicate
 * Content-Length or Transfer-Encoding, both of them, a bad length or an
 * unknown transfer coding is an invalid header; a duplicate of a
 * single-valued field (Content-Type, Location, Expires, ...) is logged and
 * ignored. A response that does not start like a status line is HTTP/0.9.
 */
import type { UpstreamHead } from './protocol.ts';

/** A parse failure: the log message, and whether it counts as nginx's "invalid header". */
export interface HeadError {
  error: string;
}

/** Fields nginx keeps once: a second one is logged and ignored. */
const SINGLE = [
  'status', 'content-type', 'date', 'etag', 'server', 'location', 'refresh', 'x-accel-redirect',
  'last-modified', 'expires', 'x-accel-expires', 'x-accel-limit-rate',
];

const CL_BIT = 1;
const TE_BIT = 2;
/** A bit per field that may appear once (framing fields and SINGLE), to spot repeats without allocating. */
const ONCE_BITS = new Map<string, number>([['content-length', CL_BIT], ['transfer-encoding', TE_BIT]]);
SINGLE.forEach((n, i) => ONCE_BITS.set(n, 4 << i));

/** Parses the status line at the start of `s`. Returns the end offset, 0 if incomplete, -1 if not HTTP. */
function parseStatusLine(s: string, out: { status: number; line: string; http11: boolean }): number {
  const n = s.length;
  const prefix = 'HTTP/';
  for (let i = 0; i < 5; i++) {
    if (i >= n) return 0;
    if (s[i] !== prefix[i]) return -1;
  }
  let i = 5;
  // major version: 1-9 then digits
  if (i >= n) return 0;
  let c = s.charCodeAt(i);
  if (c < 0x31 || c > 0x39) return -1;
  let major = c - 0x30;
  for (i++; ; i++) {
    if (i >= n) return 0;
    c = s.charCodeAt(i);
    if (c === 0x2e) break;
    if (c < 0x30 || c > 0x39 || major > 99) return -1;
    major = major * 10 + c - 0x30;
  }
  i++;
  if (i >= n) return 0;
  c = s.charCodeAt(i);
  if (c < 0x30 || c > 0x39) return -1;
  let minor = c - 0x30;
  for (i++; ; i++) {
    if (i >= n) return 0;
    c = s.charCodeAt(i);
    if (c === 0x20) break;
    if (c < 0x30 || c > 0x39 || minor > 99) return -1;
    minor = minor * 10 + c - 0x30;
  }
  while (i < n && s.charCodeAt(i) === 0x20) i++;
  let status = 0;
  const start = i;
  for (let k = 0; k < 3; k++, i++) {
    if (i >= n) return 0;
    c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return -1;
    status = status * 10 + c - 0x30;
  }
  if (i >= n) return 0;
  c = s.charCodeAt(i);
  let end: number;
  if (c === 0x20 || c === 0x2e || c === 0x0d || c === 0x0a) {
    const lf = s.indexOf('\n', i);
    if (lf < 0) return 0;
    end = lf;
    // "\r" before LF ends the text; a lone CR elsewhere must be followed by LF
    const cr = s.indexOf('\r', i);
    if (cr >= 0 && cr < lf && cr !== lf - 1) return -1;
    out.line = s.slice(start, s.charCodeAt(lf - 1) === 0x0d ? lf - 1 : lf);
  } else {
    return -1;
  }
  out.status = status;
  out.http11 = major * 1000 + minor >= 1001;
  return end + 1;
}

/**
 * Parses a complete or partial response head in `s` (a latin1 view of the
 * buffer). Returns the head, `undefined` when more bytes are needed, or an
 * error for an invalid header. `warn` receives nginx's warnings.
 */
export function parseResponseHead(s: string, warn: (msg: string) => void): UpstreamHead | HeadError | undefined {
  const sl = { status: 0, line: '', http11: false };
  const p = parseStatusLine(s, sl);
  if (p === 0) return undefined;
  if (p < 0) {
    return {
      status: 200, statusLine: '', http09: true, headers: { names: [], lnames: [], values: [] },
      contentLength: -1, chunked: false, connectionClose: true, bodyStart: 0,
    };
  }
  const head: UpstreamHead = {
    status: sl.status, statusLine: sl.line, http09: false, headers: { names: [], lnames: [], values: [] },
    contentLength: -1, chunked: false, connectionClose: !sl.http11, bodyStart: 0,
  };
  const done = readFields(s, p, head, warn);
  return done === true ? head : done;
}

/**
 * Reads the header fields from `pos` up to the blank line into `head`
 * (setting bodyStart): true when complete, undefined when more bytes are
 * needed, or the error of an invalid header.
 */
function readFields(s: string, pos: number, head: UpstreamHead, warn: (msg: string) => void): true | HeadError | undefined {
  const seen = { bits: 0 };
  for (;;) {
    const lf = s.indexOf('\n', pos);
    if (lf < 0) return undefined;
    let end = lf;
    while (end > pos && s.charCodeAt(end - 1) === 0x0d) end--;
    if (end === pos) {
      // empty line (a bare CR before LF included): end of the header
      if (lf - pos > 1) return { error: invalidLine(s, pos, end) };
      head.bodyStart = lf + 1;
      return true;
    }
    const line = s.slice(pos, end);
    pos = lf + 1;
    const first = line.charCodeAt(0);
    if (first <= 0x20 || first === 0x7f || first === 0x3a) return { error: invalidText(line, 0) };
    let colon = -1;
    let ignore = false;
    for (let i = 0; i < line.length; i++) {
      const c = line.charCodeAt(i);
      if (c === 0x3a) { colon = i; break; }
      if (c === 0x2f && i === 4 && line.startsWith('HTTP')) { ignore = true; break; }
      if (c <= 0x20 || c === 0x7f) return { error: invalidText(line, i) };
    }
    if (ignore) continue;
    const name = colon >= 0 ? line.slice(0, colon) : line;
    let value = '';
    if (colon >= 0) {
      let a = colon + 1;
      while (a < line.length && line.charCodeAt(a) === 0x20) a++;
      let b = line.length;
      while (b > a && line.charCodeAt(b - 1) === 0x20) b--;
      value = line.slice(a, b);
      const nul = value.indexOf('\0');
      if (nul >= 0) return { error: invalidText(line, a + nul) };
      if (value.includes('\r')) return { error: invalidText(line, line.indexOf('\r')) };
    }
    const lname = name.toLowerCase();
    const r = fieldRule(head, name, lname, value, warn, seen);
    if (r === IGNORED) continue;
    if (r !== undefined) return { error: r };
    head.headers.names.push(name);
    head.headers.lnames.push(lname);
    head.headers.values.push(value);
  }
}

/**
 * A CGI-style head (FastCGI's stdout, an SCGI or uwsgi answer): header
 * fields, the status from a `Status:` field, else 302 with a Location, else
 * 200 (ngx_http_fastcgi_process_header). With `statusLine`, the answer may
 * start with an HTTP status line instead (SCGI and uwsgi). The body's end is
 * the protocol's business: no chunked framing, and the upstream closes.
 */
export function parseCgiHead(s: string, statusLine: boolean, warn: (msg: string) => void): UpstreamHead | HeadError | undefined {
  const head: UpstreamHead = {
    status: 0, statusLine: '', http09: false, headers: { names: [], lnames: [], values: [] },
    contentLength: -1, chunked: false, connectionClose: true, bodyStart: 0,
  };
  let pos = 0;
  if (statusLine) {
    const sl = { status: 0, line: '', http11: false };
    const p = parseStatusLine(s, sl);
    if (p === 0) return undefined;
    if (p > 0) {
      head.status = sl.status;
      head.statusLine = sl.line;
      pos = p;
    }
  }
  const done = readFields(s, pos, head, warn);
  if (done !== true) return done;
  // the body is framed by the protocol, never chunked
  head.chunked = false;
  if (head.status) return head;
  const st = head.headers.lnames.indexOf('status');
  if (st >= 0) {
    const v = head.headers.values[st];
    if (!/^\d{3}/.test(v)) return { error: `upstream sent invalid status "${v}"` };
    head.status = Number(v.slice(0, 3));
    head.statusLine = v;
  } else if (head.headers.lnames.includes('location')) {
    head.status = 302;
    head.statusLine = '302 Moved Temporarily';
  } else {
    head.status = 200;
    head.statusLine = '200 OK';
  }
  return head;
}
const IGNORED = '';

/** Applies the per-field rules; returns IGNORED, an error message, or undefined to keep the field. */
function fieldRule(head: UpstreamHead, name: string, lname: string, value: string, warn: (m: string) => void, seen: { bits: number }): string | undefined {
  const bit = ONCE_BITS.get(lname);
  if (bit === undefined) {
    if (lname === 'connection' && value.toLowerCase().includes('close')) head.connectionClose = true;
    return undefined;
  }
  switch (bit) {
    case CL_BIT: {
      if (seen.bits & CL_BIT) return `upstream sent duplicate header line: "${name}: ${value}", previous value: "${prev(head, lname)}"`;
      if (seen.bits & TE_BIT) return 'upstream sent "Content-Length" and "Transfer-Encoding" headers at the same time';
      seen.bits |= CL_BIT;
      if (!/^\d{1,18}$/.test(value)) return `upstream sent invalid "Content-Length" header: "${name}: ${value}"`;
      head.contentLength = Number(value);
      return undefined;
    }
    case TE_BIT: {
      if (seen.bits & TE_BIT) return `upstream sent duplicate header line: "${name}: ${value}", previous value: "${prev(head, lname)}"`;
      if (seen.bits & CL_BIT) return 'upstream sent "Content-Length" and "Transfer-Encoding" headers at the same time';
      seen.bits |= TE_BIT;
      if (value.toLowerCase() !== 'chunked') return `upstream sent unknown "Transfer-Encoding": "${value}"`;
      head.chunked = true;
      return undefined;
    }
    default:
      if (seen.bits & bit) {
        warn(`upstream sent duplicate header line: "${name}: ${value}", previous value: "${prev(head, lname)}", ignored`);
        return IGNORED;
      }
      seen.bits |= bit;
      return undefined;
  }
}

function prev(head: UpstreamHead, lname: string): string {
  const i = head.headers.lnames.indexOf(lname);
  return i >= 0 ? `${head.headers.names[i]}: ${head.headers.values[i]}` : '';
}

function invalidLine(s: string, from: number, to: number): string {
  return invalidText(s.slice(from, to + 1), to - from);
}

/** nginx's `upstream sent invalid header: "Name\xNN..."` (the text up to the bad byte). */
function invalidText(line: string, at: number): string {
  const code = line.charCodeAt(at);
  const hex = Number.isNaN(code) ? '0a' : code.toString(16).padStart(2, '0');
  return `upstream sent invalid header: "${line.slice(0, at)}\\x${hex}..."`;
}

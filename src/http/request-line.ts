/**
 * nginx's grammar for the request line and header lines
 * (ngx_http_parse_request_line, ngx_http_parse_header_line) and its Host
 * check (ngx_http_validate_host), over raw bytes. The connection runs these
 * on what the client sent, so requests are accepted and refused exactly
 * where nginx accepts and refuses them; see
 * docs/http-parsing.md.
 */

/** Parse results (nginx's NGX_AGAIN, NGX_OK, NGX_HTTP_PARSE_*). */
export const AGAIN = -1;
export const PARSED = 0;
export const INVALID_METHOD = 1;
export const INVALID_REQUEST = 2;
export const INVALID_VERSION = 3;
export const INVALID_09_METHOD = 4;
export const HEADER_DONE = 5;
export const INVALID_HEADER = 6;

/** nginx's error log line for each request line error. */
export const REQUEST_LINE_ERRORS = ['', 'client sent invalid method', 'client sent invalid request',
  'client sent invalid version', 'client sent invalid method in HTTP/0.9 request'];

const CR = 13;
const LF = 10;
const SP = 32;

/** Bytes that need no attention in a URI (nginx's `usual` table): not CTL, SP, DEL, `#%+./?`. */
const USUAL = new Uint8Array(256);
for (let c = 0x21; c < 256; c++) USUAL[c] = c === 0x7f || '#%+./?'.includes(String.fromCharCode(c)) ? 0 : 1;

/** Header name bytes nginx accepts as valid: lowercase form, 0 for any other byte. */
const LOWCASE = new Uint8Array(256);
for (let c = 0; c < 256; c++) {
  if ((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x7a) || c === 0x2d) LOWCASE[c] = c;
  else if (c >= 0x41 && c <= 0x5a) LOWCASE[c] = c | 0x20;
}

/** Where the parts of a request line are, as offsets into the buffer. */
export class RequestLine {
  start = 0;
  methodEnd = 0;
  uriStart = -1;
  uriEnd = -1;
  argsStart = -1;
  schemaEnd = -1;
  hostStart = -1;
  hostEnd = -1;
  portStart = -1;
  portEnd = -1;
  /** The URI has `.`/`//`/`#` (needs ngx_http_parse_complex_uri), `%`, or no path (`http://h?a`). */
  complexUri = false;
  quotedUri = false;
  emptyPathInUri = false;
  /** Where "HTTP/" starts, -1 for HTTP/0.9. */
  protocolStart = -1;
  major = 0;
  minor = 0;
  /** End of the request line text (before CR LF). */
  end = -1;
  /** Offset after the line's LF. */
  next = 0;
}

/**
 * Parses a request line in b[p..last) (nginx's state machine, restarted at
 * the line's start each time). Returns PARSED (fields in `rl`), AGAIN when
 * the line is incomplete, or an INVALID_* code. Leading empty lines are
 * skipped; `rl.start` is where the request line begins.
 */
export function parseRequestLine(b: Buffer, p: number, last: number, rl: RequestLine): number {
  let state = 0;
  let c: number;
  rl.uriStart = rl.uriEnd = rl.argsStart = rl.schemaEnd = rl.hostStart = rl.hostEnd = -1;
  rl.portStart = rl.portEnd = rl.end = rl.protocolStart = -1;
  rl.complexUri = rl.quotedUri = rl.emptyPathInUri = false;
  rl.major = 0;
  rl.minor = -1;
  for (; p < last; p++) {
    const ch = b[p];
    switch (state) {
      case 0: // start: skip empty lines, then the method
        rl.start = p;
        if (ch === CR || ch === LF) break;
        if ((ch < 0x41 || ch > 0x5a) && ch !== 0x5f && ch !== 0x2d) return INVALID_METHOD;
        state = 1;
        break;
      case 1: // method
        if (ch === SP) { rl.methodEnd = p; state = 2; break; }
        if ((ch < 0x41 || ch > 0x5a) && ch !== 0x5f && ch !== 0x2d) return INVALID_METHOD;
        break;
      case 2: // spaces before URI
        if (ch === 0x2f) { rl.uriStart = p; state = 10; break; }
        c = ch | 0x20;
        if (c >= 0x61 && c <= 0x7a) { state = 3; break; }
        if (ch !== SP) return INVALID_REQUEST;
        break;
      case 3: // schema
        c = ch | 0x20;
        if ((c >= 0x61 && c <= 0x7a) || (ch >= 0x30 && ch <= 0x39) || ch === 0x2b || ch === 0x2d || ch === 0x2e) break;
        if (ch !== 0x3a) return INVALID_REQUEST;
        rl.schemaEnd = p;
        state = 4;
        break;
      case 4: // first slash after schema
      case 5: // second slash
        if (ch !== 0x2f) return INVALID_REQUEST;
        state++;
        break;
      case 6: // host start
      case 7: // host
      case 9: { // host end
        if (state === 6) {
          rl.hostStart = p;
          if (ch === 0x5b) { state = 8; break; }
          state = 7;
        }
        if (state === 7) {
          c = ch | 0x20;
          if ((c >= 0x61 && c <= 0x7a) || (ch >= 0x30 && ch <= 0x39) || ch === 0x2e || ch === 0x2d) break;
        }
        rl.hostEnd = p;
        const s = afterAuthority(ch, p, rl);
        if (s < 0) return INVALID_REQUEST;
        if (ch === 0x3a) rl.portStart = p + 1;
        state = s;
        break;
      }
      case 8: // IP literal: unreserved / sub-delims / ':'
        c = ch | 0x20;
        if ((ch >= 0x30 && ch <= 0x39) || (c >= 0x61 && c <= 0x7a)) break;
        if (ch === 0x5d) { state = 9; break; }
        if (!":-._~!$&'()*+,;=".includes(String.fromCharCode(ch))) return INVALID_REQUEST;
        break;
      case 11: // port
        if (ch >= 0x30 && ch <= 0x39) break;
        if (ch !== 0x2f && ch !== 0x3f && ch !== SP) return INVALID_REQUEST;
        rl.portEnd = p;
        state = afterAuthority(ch, p, rl);
        break;
      case 10: // after a slash in the URI
        if (USUAL[ch]) { state = 12; break; }
        switch (ch) {
          case SP: rl.uriEnd = p; state = 14; break;
          case CR: rl.uriEnd = p; rl.minor = 9; state = 24; break;
          case LF: rl.uriEnd = p; rl.minor = 9; return lineDone(b, p, rl);
          case 0x2e: case 0x2f: case 0x23: rl.complexUri = true; state = 13; break;
          case 0x25: rl.quotedUri = true; state = 13; break;
          case 0x3f: rl.argsStart = p + 1; state = 13; break;
          case 0x2b: break;
          default:
            if (ch < 0x20 || ch === 0x7f) return INVALID_REQUEST;
            state = 12;
        }
        break;
      case 12: // URI, checking for "/", "%"
        if (USUAL[ch]) break;
        switch (ch) {
          case 0x2f: state = 10; break;
          case 0x2e: case 0x2b: break;
          case SP: rl.uriEnd = p; state = 14; break;
          case CR: rl.uriEnd = p; rl.minor = 9; state = 24; break;
          case LF: rl.uriEnd = p; rl.minor = 9; return lineDone(b, p, rl);
          case 0x25: rl.quotedUri = true; state = 13; break;
          case 0x3f: rl.argsStart = p + 1; state = 13; break;
          case 0x23: rl.complexUri = true; state = 13; break;
          default:
            if (ch < 0x20 || ch === 0x7f) return INVALID_REQUEST;
        }
        break;
      case 13: // URI, anything usual
        if (USUAL[ch]) break;
        switch (ch) {
          case SP: rl.uriEnd = p; state = 14; break;
          case CR: rl.uriEnd = p; rl.minor = 9; state = 24; break;
          case LF: rl.uriEnd = p; rl.minor = 9; return lineDone(b, p, rl);
          case 0x23: rl.complexUri = true; break;
          default:
            if (ch < 0x20 || ch === 0x7f) return INVALID_REQUEST;
        }
        break;
      case 14: // spaces after the URI, then "HTTP/" or the end (HTTP/0.9)
        if (ch === SP) break;
        if (ch === CR) { rl.minor = 9; state = 24; break; }
        if (ch === LF) { rl.minor = 9; return lineDone(b, p, rl); }
        if (ch !== 0x48) return INVALID_REQUEST;
        rl.protocolStart = p;
        state = 15;
        break;
      case 15: case 16: case 17: case 18: // "TTP/"
        if (ch !== 'TTP/'.charCodeAt(state - 15)) return INVALID_REQUEST;
        state++;
        break;
      case 19: // first major digit
        if (ch < 0x31 || ch > 0x39) return INVALID_REQUEST;
        rl.major = ch - 0x30;
        if (rl.major > 1) return INVALID_VERSION;
        state = 20;
        break;
      case 20: // major digits or dot
        if (ch === 0x2e) { state = 21; break; }
        if (ch < 0x30 || ch > 0x39) return INVALID_REQUEST;
        rl.major = rl.major * 10 + ch - 0x30;
        if (rl.major > 1) return INVALID_VERSION;
        break;
      case 21: // first minor digit
        if (ch < 0x30 || ch > 0x39) return INVALID_REQUEST;
        rl.minor = ch - 0x30;
        state = 22;
        break;
      case 22: // minor digits, then the end
        if (ch === CR) { state = 24; break; }
        if (ch === LF) return lineDone(b, p, rl);
        if (ch === SP) { state = 23; break; }
        if (ch < 0x30 || ch > 0x39 || rl.minor > 99) return INVALID_REQUEST;
        rl.minor = rl.minor * 10 + ch - 0x30;
        break;
      case 23: // spaces after the version
        if (ch === SP) break;
        if (ch === CR) { state = 24; break; }
        if (ch === LF) return lineDone(b, p, rl);
        return INVALID_REQUEST;
      case 24: // CR seen: LF must follow
        rl.end = p - 1;
        if (ch !== LF) return INVALID_REQUEST;
        return lineDone(b, p, rl);
    }
  }
  return AGAIN;
}

/** After the authority of an absolute URI: `:` port, `/` path, `?` args, SP (no path). Returns the next state or -1. */
function afterAuthority(ch: number, p: number, rl: RequestLine): number {
  switch (ch) {
    case 0x3a: return 11;
    case 0x2f: rl.uriStart = p; return 10;
    case 0x3f: rl.uriStart = p; rl.argsStart = p + 1; rl.emptyPathInUri = true; return 13;
    case SP:
      // the URI is the "/" of "://" (nginx keeps pointers into the request line)
      rl.uriStart = rl.schemaEnd + 1;
      rl.uriEnd = rl.schemaEnd + 2;
      return 14;
    default: return -1;
  }
}

function lineDone(b: Buffer, p: number, rl: RequestLine): number {
  rl.next = p + 1;
  if (rl.end < 0) rl.end = p;
  if (rl.minor < 0) rl.minor = 0;
  if (rl.minor === 9 && rl.major === 0) {
    // HTTP/0.9: only GET
    if (rl.methodEnd - rl.start !== 3 || b[rl.start] !== 0x47 || b[rl.start + 1] !== 0x45 || b[rl.start + 2] !== 0x54) {
      return INVALID_09_METHOD;
    }
  }
  return PARSED;
}

/** Where the parts of a header line are. */
export class HeaderLine {
  nameStart = 0;
  nameEnd = 0;
  valueStart = 0;
  valueEnd = 0;
  /** The name has bytes nginx does not accept (ignored with `ignore_invalid_headers on`). */
  invalid = false;
  /** For INVALID_HEADER: offset of the offending byte. */
  errorAt = 0;
  next = 0;
}

/**
 * Parses one header line in b[p..last): PARSED, HEADER_DONE (the empty
 * line that ends the head), AGAIN, or INVALID_HEADER.
 */
export function parseHeaderLine(b: Buffer, p: number, last: number, allowUnderscores: boolean, h: HeaderLine): number {
  let state = 0;
  h.invalid = false;
  h.nameStart = p;
  for (; p < last; p++) {
    const ch = b[p];
    switch (state) {
      case 0: // first byte
        if (ch === CR) { h.valueEnd = p; state = 7; break; }
        if (ch === LF) { h.next = p + 1; return HEADER_DONE; }
        state = 1;
        if (LOWCASE[ch]) break;
        if (ch === 0x5f) { if (!allowUnderscores) h.invalid = true; break; }
        if (ch <= SP || ch === 0x7f || ch === 0x3a) { h.errorAt = p; return INVALID_HEADER; }
        h.invalid = true;
        break;
      case 1: // name
        if (LOWCASE[ch]) break;
        if (ch === 0x5f) { if (!allowUnderscores) h.invalid = true; break; }
        if (ch === 0x3a) { h.nameEnd = p; state = 2; break; }
        if (ch === CR || ch === LF) {
          // a line without a colon is a header with an empty value
          h.nameEnd = h.valueStart = h.valueEnd = p;
          if (ch === LF) { h.next = p + 1; return PARSED; }
          state = 6;
          break;
        }
        if (ch <= SP || ch === 0x7f) { h.errorAt = p; return INVALID_HEADER; }
        h.invalid = true;
        break;
      case 2: // spaces before the value
        if (ch === SP) break;
        if (ch === CR || ch === LF) {
          h.valueStart = h.valueEnd = p;
          if (ch === LF) { h.next = p + 1; return PARSED; }
          state = 6;
          break;
        }
        if (ch === 0) { h.errorAt = p; return INVALID_HEADER; }
        h.valueStart = p;
        state = 3;
        break;
      case 3: { // value
        for (; p < last; p++) {
          const c = b[p];
          if (c >= 0x20) continue;
          if (c === LF || c === CR) break;
          // nginx takes control bytes in values, except NUL
          if (c === 0) { h.errorAt = p; return INVALID_HEADER; }
        }
        if (p === last) return AGAIN;
        let end = p;
        while (b[p] === CR) p++;
        if (p === last) return AGAIN;
        if (b[p] !== LF) { h.errorAt = p; return INVALID_HEADER; }
        while (end > h.valueStart && b[end - 1] === SP) end--;
        h.valueEnd = end;
        h.next = p + 1;
        return PARSED;
      }
      case 6: // CR seen: LF ends the line (more CRs are allowed)
        if (ch === LF) { h.next = p + 1; return PARSED; }
        if (ch !== CR) { h.errorAt = p; return INVALID_HEADER; }
        break;
      case 7: // CR of the empty line
        if (ch === LF) { h.next = p + 1; return HEADER_DONE; }
        h.errorAt = p;
        return INVALID_HEADER;
    }
  }
  return AGAIN;
}

/**
 * ngx_http_validate_host: the host part of a Host value or absolute URI,
 * lowercased, without port and trailing dot; undefined when invalid.
 */
export function validateHost(host: string): string | undefined {
  let dotPos = -2;
  let hostLen = host.length;
  let state = 0; // 0 usual, 1 IP literal, 2 rest (port)
  let upper = false;
  for (let i = 0; i < host.length; i++) {
    const ch = host.charCodeAt(i);
    switch (ch) {
      case 0x2e:
        if (dotPos === i - 1) return undefined;
        dotPos = i;
        break;
      case 0x3a:
        if (state === 0) { hostLen = i; state = 2; }
        break;
      case 0x5b:
        if (i === 0) state = 1;
        break;
      case 0x5d:
        if (state === 1) { hostLen = i + 1; state = 2; }
        break;
      default:
        if (ch === 0x2f || ch <= SP || ch === 0x7f) return undefined;
        if (ch >= 0x41 && ch <= 0x5a) upper = true;
    }
  }
  if (dotPos === hostLen - 1) hostLen--;
  if (hostLen <= 0) return undefined;
  const h = hostLen === host.length ? host : host.slice(0, hostLen);
  return upper ? h.toLowerCase() : h;
}

/**
 * Reading one request head the way nginx does (ngx_http_process_request_line,
 * ngx_http_process_request_headers): line by line as bytes arrive, within
 * `client_header_buffer_size` / `large_client_header_buffers` (414 for the
 * request line, 494 for headers), choosing the virtual server from the
 * request line or the Host header, applying `ignore_invalid_headers`,
 * `underscores_in_headers`, `max_headers`, the unique-header and Host rules,
 * and the checks made once the head is complete (Host for HTTP/1.1,
 * Content-Length, Transfer-Encoding, CONNECT/TRACE).
 *
 * The header lines kept become the request's header list (node's
 * rawHeaders form: name, value, name, value, ...). See docs/http-parsing.md.
 */
import type { ServerConf } from './http-conf.ts';
import { CONN_CLOSE, CONN_KEEPALIVE, RequestHead } from './request-head.ts';
import {
  AGAIN, HEADER_DONE, HeaderLine, INVALID_09_METHOD, INVALID_HEADER, INVALID_VERSION, PARSED, parseHeaderLine, parseRequestLine,
  REQUEST_LINE_ERRORS, RequestLine, validateHost,
} from './request-line.ts';
import { parseUri } from './uri.ts';
import type { ServerMatch } from './virtual-server.ts';

/** What the head reader needs of a virtual server (compiled once per configuration). */
export interface HeadSettings {
  largeCount: number;
  largeSize: number;
  ignoreInvalid: boolean;
  underscores: boolean;
  maxHeaders: number;
}

/** The listening address side: server selection and per-server settings. */
export interface HeadContext {
  defaultServer: ServerConf;
  /** client_header_buffer_size of the address's default server. */
  bufferSize: number;
  /** merge_slashes of the default server (nginx decodes the URI before choosing the server). */
  mergeSlashes: boolean;
  /** Keep each head's bytes as received (RequestHead.raw): only when a module asked (HttpMainConf.keepRawHeads). */
  keepRaw: boolean;
  select(host: string): ServerMatch;
  settings(server: ServerConf): HeadSettings;
}


export const HEAD_INCOMPLETE = 0;
export const HEAD_DONE = 1;
export const HEAD_ERROR = 2;

/** Headers nginx allows once (ngx_http_process_unique_header_line). */
const UNIQUE = new Set(['if-modified-since', 'if-unmodified-since', 'if-match', 'if-none-match', 'content-length',
  'content-range', 'if-range', 'transfer-encoding', 'expect', 'authorization']);
/** Header names with nginx handlers, by length (looked up without making strings). */
const SPECIAL: Array<string[] | undefined> = [];
for (const name of [...UNIQUE, 'host', 'connection', 'user-agent']) (SPECIAL[name.length] ??= []).push(name);

/** The special header name b[start..start+len) is (any case), if any. */
function specialName(b: Buffer, start: number, len: number): string | undefined {
  const list = SPECIAL[len];
  if (list === undefined) return undefined;
  next: for (const name of list) {
    for (let i = 0; i < len; i++) if ((b[start + i] | 0x20) !== name.charCodeAt(i)) continue next;
    return name;
  }
  return undefined;
}

const MAX_ERROR_STR = 2048 - 300;
/** nginx's NGX_MAX_OFF_T_VALUE, as 19 digits (compared as a string with another 19 digits). */
const MAX_OFF_T = '9223372036854775807';

/** Readers not in use: a connection takes one when a head starts arriving and gives it back once the head is read. */
const spareReaders: HeadReader[] = [];
const SPARE_READERS = 16;

/** A reader for the next request head on a connection of `ctx`'s address. */
export function takeHeadReader(ctx: HeadContext): HeadReader {
  const reader = spareReaders.pop();
  if (reader === undefined) return new HeadReader(ctx);
  reader.reset(ctx);
  return reader;
}

/** `reader` read its head (the request keeps that head; the reader makes a new one when taken again). */
export function releaseHeadReader(reader: HeadReader): void {
  if (spareReaders.length < SPARE_READERS) spareReaders.push(reader);
}

/**
 * Reads one request head. feed() is given the buffer of bytes not yet
 * consumed (the head starts at 0) and parses what is complete.
 */
export class HeadReader {
  private ctx: HeadContext;
  private readonly rl = new RequestLine();
  private readonly hl = new HeaderLine();
  head: RequestHead;
  private settings: HeadSettings;
  /** Parse position: start of the next line to read. */
  private pos = 0;
  private inHeaders = false;
  /** nginx's header buffers: capacity and use of the current one, large buffers taken. */
  private cap = 0;
  private used = 0;
  private large = 0;
  private count = 0;
  private hostHeader: string | undefined;
  private teValue: string | undefined;
  private uniqueSeen: Map<string, string> | undefined;

  constructor(ctx: HeadContext) {
    // the other fields start as reset() leaves them
    this.ctx = ctx;
    this.head = new RequestHead(ctx.defaultServer);
    this.settings = ctx.settings(ctx.defaultServer);
    this.cap = ctx.bufferSize;
  }

  /** Starts over for a new head on a connection of `ctx`'s address. */
  reset(ctx: HeadContext): void {
    this.ctx = ctx;
    this.head = new RequestHead(this.ctx.defaultServer);
    this.settings = this.ctx.settings(this.ctx.defaultServer);
    this.pos = 0;
    this.started = false;
    this.inHeaders = false;
    this.cap = this.ctx.bufferSize;
    this.used = 0;
    this.large = 0;
    this.count = 0;
    this.hostHeader = undefined;
    this.teValue = undefined;
    this.uniqueSeen = undefined;
  }

  /** Some bytes of a request arrived (for timeouts: 408 versus a silent close). */
  started = false;

  /** Parses b (the head starts at offset 0); HEAD_DONE / HEAD_ERROR fill this.head. */
  feed(b: Buffer): number {
    const last = b.length;
    if (last > 0) this.started = true;
    if (!this.inHeaders) {
      const rc = parseRequestLine(b, this.pos, last, this.rl);
      if (rc === AGAIN) {
        // a partial line must still fit (leading empty lines are not counted)
        if (!this.fits(last - this.rl.start)) return this.tooLongUri(b, last);
        return HEAD_INCOMPLETE;
      }
      if (rc !== PARSED) {
        // an HTTP/0.9 request gets its error page without a response head
        if (rc === INVALID_09_METHOD) this.head.version = 9;
        return this.fail(rc === INVALID_VERSION ? 505 : 400, REQUEST_LINE_ERRORS[rc], b, this.rl.start, this.lineEnd(b, this.rl.start));
      }
      if (!this.place(this.rl.next - this.rl.start)) return this.tooLongUri(b, this.rl.next);
      const err = this.requestLine(b);
      if (err) return err;
      if (this.head.version === 9) {
        if (this.head.host === '') this.selectServer('');
        return this.done(this.rl.next);
      }
      this.inHeaders = true;
      this.pos = this.rl.next;
    }
    const h = this.hl;
    for (;;) {
      const start = this.pos;
      const rc = parseHeaderLine(b, start, last, this.settings.underscores, h);
      if (rc === AGAIN) {
        if (!this.fits(last - start)) return this.tooLongHeader(b, start, last);
        return HEAD_INCOMPLETE;
      }
      if (rc === INVALID_HEADER) {
        const text = b.toString('latin1', start, h.errorAt);
        const hex = b[h.errorAt].toString(16).padStart(2, '0');
        return this.fail(400, `client sent invalid header line: "${text}\\x${hex}..."`, b, start, h.errorAt);
      }
      if (!this.place(h.next - start)) return this.tooLongHeader(b, start, h.next);
      this.pos = h.next;
      if (rc === HEADER_DONE) return this.headersDone(b, h.next);
      if (h.invalid && this.settings.ignoreInvalid) {
        (this.head.dropped ??= []).push(`client sent invalid header line: "${b.toString('latin1', start, h.valueEnd)}"`);
        continue;
      }
      if (++this.count > this.settings.maxHeaders) {
        return this.fail(494, 'client sent too many header lines', b, start, h.next);
      }
      this.head.rawHeaders.push(b.toString('latin1', h.nameStart, h.nameEnd), b.toString('latin1', h.valueStart, h.valueEnd));
      const err = this.headerLine(b, h);
      if (err) return err;
    }
  }

  private lineEnd(b: Buffer, from: number): number {
    const lf = b.indexOf(10, from);
    let e = lf < 0 ? b.length : lf;
    // nginx's request_end stops at the first of the CRs before LF
    while (e > from && b[e - 1] === 13) e--;
    return e;
  }

  /** Whether a line (partial) of `len` bytes still fits nginx's buffers. */
  private fits(len: number): boolean {
    if (this.used + len <= this.cap) return true;
    const size = this.settings.largeSize;
    if (this.used < this.cap && this.cap - this.used >= size) return false;
    return this.large < this.settings.largeCount && len <= size;
  }

  /** Accounts a complete line of `len` bytes; false when nginx would have run out of buffers. */
  private place(len: number): boolean {
    if (this.used + len <= this.cap) {
      this.used += len;
      return true;
    }
    if (!this.fits(len)) return false;
    this.large++;
    this.cap = this.settings.largeSize;
    this.used = len;
    return true;
  }

  private tooLongUri(b: Buffer, end: number): number {
    // $request is what filled nginx's buffer: a large one the line moved to, or the one it began in
    const { largeSize, largeCount } = this.settings;
    const held = this.cap - this.used < largeSize && this.large < largeCount ? largeSize : this.cap - this.used;
    return this.fail(414, 'client sent too long URI', b, this.rl.start, Math.min(end, this.rl.start + held));
  }

  private tooLongHeader(b: Buffer, start: number, end: number): number {
    const shown = b.toString('latin1', start, Math.min(end, start + MAX_ERROR_STR));
    return this.fail(494, `client sent too long header line: "${shown}..."`, b, start, end);
  }

  /** The request line is complete: method, target, version, host of an absolute URI. */
  private requestLine(b: Buffer): number {
    const rl = this.rl;
    const head = this.head;
    const o = rl.start;
    // one string for the line; its parts are slices of it
    const line = b.toString('latin1', o, rl.end);
    head.line = line;
    head.method = line.slice(0, rl.methodEnd - o);
    head.version = rl.major * 1000 + rl.minor;
    if (rl.protocolStart >= 0) head.protocol = line.slice(rl.protocolStart - o);
    head.complexUri = rl.complexUri || rl.quotedUri;
    head.emptyPath = rl.emptyPathInUri;
    head.target = line.slice(rl.uriStart - o, rl.uriEnd - o);
    const parsed = parseUri(head.target, head.complexUri, this.ctx.mergeSlashes, head.emptyPath);
    if (parsed === undefined) return this.fail(400, 'client sent invalid request', b, rl.start, rl.end);
    head.uri = parsed.uri;
    head.args = parsed.args;
    if (rl.hostEnd >= 0) {
      const host = validateHost(line.slice(rl.hostStart - o, rl.hostEnd - o));
      if (host === undefined) return this.fail(400, 'client sent invalid host in request line', b, rl.start, rl.end);
      head.host = host;
      if (rl.portStart >= 0) head.port = line.slice(rl.portStart - o, rl.portEnd - o);
      this.selectServer(host);
    }
    return 0;
  }

  private selectServer(host: string): void {
    const m = this.ctx.select(host);
    this.head.match = m;
    this.head.server = m.server;
    this.settings = this.ctx.settings(m.server);
  }

  /** nginx's per-header handlers (Host, Connection, User-Agent, unique headers). */
  private headerLine(b: Buffer, h: HeaderLine): number {
    const name = specialName(b, h.nameStart, h.nameEnd - h.nameStart);
    if (name === undefined) return 0;
    const head = this.head;
    if (name === 'host') {
      const value = b.toString('latin1', h.valueStart, h.valueEnd);
      if (this.hostHeader !== undefined) {
        return this.fail(400, `client sent duplicate host header: "${b.toString('latin1', h.nameStart, h.valueEnd)}", previous value: "Host: ${this.hostHeader}"`, b, 0, 0);
      }
      this.hostHeader = value;
      head.hostHeader = value;
      const host = validateHost(value);
      if (host === undefined) return this.fail(400, 'client sent invalid host header', b, 0, 0);
      if (head.host === '') {
        head.host = host;
        const colon = host.startsWith('[') ? value.indexOf(':', value.indexOf(']')) : value.indexOf(':');
        if (colon >= 0) head.port = value.slice(colon + 1);
        this.selectServer(host);
      }
      return 0;
    }
    if (name === 'connection') {
      const v = b.toString('latin1', h.valueStart, h.valueEnd).toLowerCase();
      if (v.includes('close')) head.connection = CONN_CLOSE;
      else if (v.includes('keep-alive')) head.connection = CONN_KEEPALIVE;
      return 0;
    }
    if (name === 'user-agent') {
      if (head.userAgentValue === undefined) head.userAgentValue = b.toString('latin1', h.valueStart, h.valueEnd);
      return 0;
    }
    if (!UNIQUE.has(name)) return 0;
    const line = b.toString('latin1', h.nameStart, h.valueEnd);
    const seen = (this.uniqueSeen ??= new Map());
    const previous = seen.get(name);
    if (previous !== undefined) {
      return this.fail(400, `client sent duplicate header line: "${line}", previous value: "${previous}"`, b, 0, 0);
    }
    seen.set(name, line);
    if (name === 'content-length') {
      const v = b.toString('latin1', h.valueStart, h.valueEnd);
      // ngx_atoof: digits only, at most NGX_MAX_OFF_T_VALUE
      head.contentLength = /^\d{1,19}$/.test(v) && (v.length < 19 || v <= MAX_OFF_T) ? Number(v) : -2;
    } else if (name === 'transfer-encoding') {
      this.teValue = b.toString('latin1', h.valueStart, h.valueEnd);
      head.chunked = this.teValue.toLowerCase() === 'chunked';
    }
    return 0;
  }

  /** The empty line arrived: nginx's ngx_http_process_request_header checks. */
  private headersDone(b: Buffer, end: number): number {
    const head = this.head;
    if (this.hostHeader === undefined) {
      // no host: the server named "" is the one for requests without Host
      if (head.host === '') this.selectServer('');
      // nginx asks HTTP/1.1 for the header even when an absolute URI named the host
      if (head.version > 1000) return this.fail(400, 'client sent HTTP/1.1 request without "Host" header', b, 0, 0);
    }
    if (head.contentLength === -2) return this.fail(400, 'client sent invalid "Content-Length" header', b, 0, 0);
    if (this.teValue !== undefined) {
      if (head.version < 1001) return this.fail(400, 'client sent HTTP/1.0 request with "Transfer-Encoding" header', b, 0, 0);
      if (head.chunked) {
        if (head.contentLength >= 0) {
          return this.fail(400, 'client sent "Content-Length" and "Transfer-Encoding" headers at the same time', b, 0, 0);
        }
      } else {
        return this.fail(501, `client sent unknown "Transfer-Encoding": "${this.teValue}"`, b, 0, 0);
      }
    }
    if (head.method === 'CONNECT') return this.fail(405, 'client sent CONNECT method', b, 0, 0);
    if (head.method === 'TRACE') return this.fail(405, 'client sent TRACE method', b, 0, 0);
    return this.done(end, b);
  }

  private done(end: number, b?: Buffer): number {
    this.head.end = end;
    this.head.length = end - this.rl.start;
    // the head as the client sent it (ngx.req.raw_header); the read buffer is reused after this
    if (b && this.ctx.keepRaw) this.head.raw = b.toString('latin1', this.rl.start, end);
    return HEAD_DONE;
  }

  /** The client went away or timed out mid-head: nginx logs the request with `status`. */
  abort(status: number, log: string, b: Buffer | undefined): void {
    this.fail(status, log, b ?? Buffer.alloc(0), this.rl.start, b ? this.lineEnd(b, this.rl.start) : 0);
  }

  /** Records an error nginx answers with `status`; `line` spans the text logged as $request when no request line exists yet. */
  private fail(status: number, log: string, b: Buffer, lineStart: number, lineEnd: number): number {
    const head = this.head;
    head.error = status;
    head.errorLog = log;
    head.errorAction = this.inHeaders ? 'reading client request headers' : 'reading client request line';
    if (!head.line && lineEnd > lineStart) head.line = b.toString('latin1', lineStart, lineEnd);
    head.length = Math.max(0, this.pos - this.rl.start);
    return HEAD_ERROR;
  }
}


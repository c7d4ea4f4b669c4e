// Raw-socket HTTP/1.x client helpers for byte-exact assertions. Nothing here
// normalizes what the server sent: header names keep their case and order,
// the raw body is kept next to the de-chunked one, and every byte after a
// response is returned as `rest`.

import * as net from 'node:net';

export type Target = number | string;

export interface ParsedResponse {
  /** First line without CRLF, e.g. "HTTP/1.1 200 OK". */
  statusLine: string;
  /** "1.1", "1.0". */
  httpVersion: string;
  status: number;
  /** Reason phrase ('' when absent). */
  reason: string;
  /** Header fields in wire order and original case; values without surrounding whitespace. */
  headers: Array<[string, string]>;
  /** First value of a header, case-insensitive. */
  header(name: string): string | undefined;
  /** All values of a header, case-insensitive, in order. */
  headerAll(name: string): string[];
  /** Payload: de-chunked when Transfer-Encoding is chunked. */
  body: Buffer;
  /** Body bytes exactly as on the wire (chunk framing included). */
  rawBody: Buffer;
  /** Trailer fields of a chunked body. */
  trailers: Array<[string, string]>;
  chunked: boolean;
  /** False when the bytes ended before the body did (short Content-Length
   * body, chunked body without its last chunk). */
  complete: boolean;
  /** 1xx responses (100 Continue, 103 Early Hints) that preceded this one. */
  interim: ParsedResponse[];
  /** All bytes of this response (interim responses included). */
  raw: Buffer;
  /** Bytes after this response (pipelined responses, or data after 101). */
  rest: Buffer;
}

export interface ParseOptions {
  /** The request was HEAD: no body whatever the headers say. */
  head?: boolean;
}

const CRLF = Buffer.from('\r\n');
const CRLFCRLF = Buffer.from('\r\n\r\n');

function parseFields(lines: string[], what: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const line of lines) {
    if ((line.startsWith(' ') || line.startsWith('\t')) && out.length > 0) {
      // obsolete line folding
      const last = out[out.length - 1]!;
      last[1] = `${last[1]} ${line.trim()}`;
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`malformed ${what} line: ${JSON.stringify(line)}`);
    out.push([line.slice(0, colon), line.slice(colon + 1).trim()]);
  }
  return out;
}

function lookup(fields: Array<[string, string]>) {
  return {
    header(name: string): string | undefined {
      const n = name.toLowerCase();
      return fields.find(([k]) => k.toLowerCase() === n)?.[1];
    },
    headerAll(name: string): string[] {
      const n = name.toLowerCase();
      return fields.filter(([k]) => k.toLowerCase() === n).map(([, v]) => v);
    },
  };
}

interface BodyResult {
  end: number;
  body: Buffer;
  trailers: Array<[string, string]>;
  complete: boolean;
}

/** Decode a chunked body at `start`; null when more bytes are needed and !eof. */
function parseChunked(buf: Buffer, start: number, eof: boolean): BodyResult | null {
  const parts: Buffer[] = [];
  let pos = start;
  const incomplete = (): BodyResult | null =>
    eof ? { end: buf.length, body: Buffer.concat(parts), trailers: [], complete: false } : null;
  for (;;) {
    const lineEnd = buf.indexOf(CRLF, pos);
    if (lineEnd < 0) return incomplete();
    const sizeLine = buf.subarray(pos, lineEnd).toString('latin1');
    const m = /^([0-9a-fA-F]+)[ \t]*(;.*)?$/.exec(sizeLine);
    if (!m) throw new Error(`malformed chunk size line at byte ${pos}: ${JSON.stringify(sizeLine)}`);
    const size = parseInt(m[1]!, 16);
    pos = lineEnd + 2;
    if (size === 0) {
      // trailer section up to an empty line
      const lines: string[] = [];
      for (;;) {
        const e = buf.indexOf(CRLF, pos);
        if (e < 0) return incomplete();
        const line = buf.subarray(pos, e).toString('latin1');
        pos = e + 2;
        if (line === '') break;
        lines.push(line);
      }
      return { end: pos, body: Buffer.concat(parts), trailers: parseFields(lines, 'trailer'), complete: true };
    }
    if (buf.length < pos + size + 2) {
      if (eof) parts.push(buf.subarray(pos, Math.min(buf.length, pos + size)));
      return incomplete();
    }
    parts.push(buf.subarray(pos, pos + size));
    if (buf[pos + size] !== 0x0d || buf[pos + size + 1] !== 0x0a) {
      throw new Error(`chunk of ${size} bytes at byte ${pos} is not followed by CRLF`);
    }
    pos += size + 2;
  }
}

export interface ParsedMessage {
  response: ParsedResponse;
  /** Bytes consumed from the start of the buffer. */
  length: number;
}

/**
 * Incremental parser: parse the one message (a 1xx counts as one) at the
 * start of `buf`. Returns null when more bytes are needed; with eof: true a
 * truncated body yields `complete: false` instead, and a truncated head
 * throws. Throws on malformed framing.
 */
export function parseNext(buf: Buffer, opts: ParseOptions & { eof?: boolean } = {}): ParsedMessage | null {
  const eof = opts.eof ?? false;
  const headEnd = buf.indexOf(CRLFCRLF);
  if (headEnd < 0) {
    if (buf.length >= 5 && buf.subarray(0, 5).toString('latin1') !== 'HTTP/') {
      throw new Error(`not an HTTP response: ${JSON.stringify(buf.subarray(0, 80).toString('latin1'))}`);
    }
    if (eof) {
      throw new Error(
        buf.length === 0
          ? 'no response: connection closed without any bytes'
          : `incomplete response head (${buf.length} bytes): ${JSON.stringify(buf.subarray(0, 200).toString('latin1'))}`,
      );
    }
    return null;
  }
  const headText = buf.subarray(0, headEnd).toString('latin1');
  const lines = headText.split('\r\n');
  const statusLine = lines[0]!;
  const m = /^HTTP\/(\d\.\d) (\d{3})(?: (.*))?$/.exec(statusLine);
  if (!m) throw new Error(`malformed status line: ${JSON.stringify(statusLine)}`);
  const status = Number(m[2]);
  const headers = parseFields(lines.slice(1), 'header');
  const { header, headerAll } = lookup(headers);
  const bodyStart = headEnd + 4;

  let result: BodyResult;
  let chunked = false;
  const te = headerAll('transfer-encoding').join(',').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
  if (opts.head || (status >= 100 && status < 200) || status === 204 || status === 304) {
    result = { end: bodyStart, body: Buffer.alloc(0), trailers: [], complete: true };
  } else if (te.length > 0 && te.at(-1) === 'chunked') {
    chunked = true;
    const r = parseChunked(buf, bodyStart, eof);
    if (!r) return null;
    result = r;
  } else if (te.length === 0 && header('content-length') !== undefined) {
    const clText = header('content-length')!.split(',')[0]!.trim();
    if (!/^\d+$/.test(clText)) throw new Error(`bad Content-Length: ${JSON.stringify(header('content-length'))}`);
    const cl = Number(clText);
    if (buf.length < bodyStart + cl) {
      if (!eof) return null;
      result = { end: buf.length, body: buf.subarray(bodyStart), trailers: [], complete: false };
    } else {
      result = { end: bodyStart + cl, body: buf.subarray(bodyStart, bodyStart + cl), trailers: [], complete: true };
    }
  } else {
    // delimited by connection close
    if (!eof) return null;
    result = { end: buf.length, body: buf.subarray(bodyStart), trailers: [], complete: true };
  }

  const response: ParsedResponse = {
    statusLine,
    httpVersion: m[1]!,
    status,
    reason: m[3] ?? '',
    headers,
    header,
    headerAll,
    body: Buffer.from(result.body),
    rawBody: Buffer.from(buf.subarray(bodyStart, result.end)),
    trailers: result.trailers,
    chunked,
    complete: result.complete,
    interim: [],
    raw: Buffer.from(buf.subarray(0, result.end)),
    rest: Buffer.from(buf.subarray(result.end)),
  };
  return { response, length: result.end };
}

/**
 * Parse the next final response (collecting 1xx interim responses into
 * `interim`; 101 Switching Protocols counts as final). null if more bytes
 * are needed (and !eof).
 */
export function parseNextFinal(buf: Buffer, opts: ParseOptions & { eof?: boolean } = {}): ParsedMessage | null {
  const interim: ParsedResponse[] = [];
  let offset = 0;
  for (;;) {
    const msg = parseNext(buf.subarray(offset), opts);
    if (!msg) return null;
    offset += msg.length;
    const r = msg.response;
    if (r.status >= 100 && r.status < 200 && r.status !== 101) {
      interim.push(r);
      if (offset >= buf.length && opts.eof) {
        throw new Error(`only interim response(s) received: ${interim.map((i) => i.statusLine).join(', ')}`);
      }
      continue;
    }
    r.interim = interim;
    r.raw = Buffer.from(buf.subarray(0, offset));
    return { response: r, length: offset };
  }
}

/** Parse one complete HTTP/1.x response from a buffer holding everything received. */
export function parseResponse(buf: Buffer | string, opts: ParseOptions = {}): ParsedResponse {
  const b = typeof buf === 'string' ? Buffer.from(buf, 'latin1') : buf;
  return parseNextFinal(b, { ...opts, eof: true })!.response;
}

/**
 * Parse pipelined responses until the buffer is used up. `head` may be a
 * per-response array (true where the request was HEAD).
 */
export function parseResponses(buf: Buffer | string, opts: { head?: boolean | boolean[] } = {}): ParsedResponse[] {
  let b = typeof buf === 'string' ? Buffer.from(buf, 'latin1') : buf;
  const out: ParsedResponse[] = [];
  while (b.length > 0) {
    const head = Array.isArray(opts.head) ? (opts.head[out.length] ?? false) : (opts.head ?? false);
    const r = parseNextFinal(b, { head, eof: true })!.response;
    out.push(r);
    if (r.status === 101) break;
    b = r.rest;
  }
  return out;
}

export type RequestPart = string | Buffer | { delayMs: number };

export interface RawRequestOptions {
  host?: string;
  timeoutMs?: number;
  /** Half-close (FIN) our side after writing everything. */
  endAfterWrite?: boolean;
  /** Read until the server closes (default true); false: stop after one complete response. */
  untilClose?: boolean;
  /** With untilClose false: the request is HEAD. */
  head?: boolean;
}

export interface RawExchange {
  data: Buffer;
  /** How reading ended: server closed (FIN), connection reset, one response complete (untilClose false). */
  end: 'close' | 'reset' | 'complete';
  error?: Error;
}

function connectOpts(target: Target, host: string): net.NetConnectOpts {
  return typeof target === 'string' ? { path: target } : { port: target, host };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Connect, write `data` (parts in order; {delayMs} pauses between them), and
 * read. Resolves with everything received and how it ended; a reset or a
 * failed write after some bytes arrived is reported as end: 'reset', not thrown.
 * Rejects on connect errors and on timeout (the error has `.received`).
 */
export function rawExchange(target: Target, data: RequestPart | RequestPart[], opts: RawRequestOptions = {}): Promise<RawExchange> {
  const parts = Array.isArray(data) ? data : [data];
  const timeoutMs = opts.timeoutMs ?? 5000;
  const untilClose = opts.untilClose ?? true;
  return new Promise<RawExchange>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let connected = false;
    let done = false;
    const sock = net.connect(connectOpts(target, opts.host ?? '127.0.0.1'));
    const received = (): Buffer => Buffer.concat(chunks, total);
    const finish = (fn: () => void): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      fn();
    };
    const timer = setTimeout(() => {
      finish(() => {
        const got = received();
        const err = new Error(
          `rawRequest: timeout after ${timeoutMs} ms with ${got.length} bytes received` +
            (got.length ? `: ${JSON.stringify(got.subarray(0, 300).toString('latin1'))}` : ''),
        ) as Error & { received: Buffer };
        err.received = got;
        reject(err);
      });
    }, timeoutMs);
    sock.on('data', (b: Buffer) => {
      chunks.push(b);
      total += b.length;
      if (!untilClose) {
        try {
          if (parseNextFinal(received(), { head: opts.head, eof: false })) finish(() => resolve({ data: received(), end: 'complete' }));
        } catch (e) {
          finish(() => reject(e));
        }
      }
    });
    sock.on('end', () => finish(() => resolve({ data: received(), end: 'close' })));
    sock.on('close', () => finish(() => resolve({ data: received(), end: 'close' })));
    sock.on('error', (e: NodeJS.ErrnoException) => {
      if (!connected) return finish(() => reject(e));
      finish(() => resolve({ data: received(), end: 'reset', error: e }));
    });
    sock.once('connect', async () => {
      connected = true;
      try {
        for (const part of parts) {
          if (done) return;
          if (typeof part === 'object' && !Buffer.isBuffer(part)) {
            await sleep(part.delayMs);
            continue;
          }
          await new Promise<void>((res, rej) => sock.write(part, (err) => (err ? rej(err) : res())));
        }
        if (opts.endAfterWrite && !done) sock.end();
      } catch {
        // reported through the 'error' event
      }
    });
  });
}

/** rawExchange's bytes only. */
export async function rawRequest(target: Target, data: RequestPart | RequestPart[], opts: RawRequestOptions = {}): Promise<Buffer> {
  return (await rawExchange(target, data, opts)).data;
}

function buildRequest(method: string, path: string, headers: Record<string, string>, version: string, body?: string | Buffer): Buffer {
  let head = `${method} ${path} HTTP/${version}\r\n`;
  const names = Object.keys(headers).map((h) => h.toLowerCase());
  if (!names.includes('host')) head += 'Host: localhost\r\n';
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  head += '\r\n';
  const h = Buffer.from(head, 'latin1');
  return body === undefined ? h : Buffer.concat([h, typeof body === 'string' ? Buffer.from(body) : body]);
}

/** `GET path HTTP/1.0` with `Host: localhost` (like nginx-tests' http_get); reads until close. */
export async function httpGet(target: Target, path: string, headers: Record<string, string> = {}, opts: RawRequestOptions = {}): Promise<ParsedResponse> {
  return parseResponse(await rawRequest(target, buildRequest('GET', path, headers, '1.0'), opts));
}

/** `HEAD path HTTP/1.0`; reads until close. */
export async function httpHead(target: Target, path: string, headers: Record<string, string> = {}, opts: RawRequestOptions = {}): Promise<ParsedResponse> {
  return parseResponse(await rawRequest(target, buildRequest('HEAD', path, headers, '1.0'), opts), { head: true });
}

/** Any method over HTTP/1.0 (default) or 1.1; adds Host: localhost unless given; reads until close. */
export async function httpRequest(
  target: Target,
  req: { method?: string; path: string; headers?: Record<string, string>; body?: string | Buffer; version?: '1.0' | '1.1' },
  opts: RawRequestOptions = {},
): Promise<ParsedResponse> {
  const method = req.method ?? 'GET';
  const bytes = buildRequest(method, req.path, req.headers ?? {}, req.version ?? '1.0', req.body);
  return parseResponse(await rawRequest(target, bytes, opts), { head: method === 'HEAD' });
}

/**
 * One persistent connection. Responses are read one message at a time:
 * readResponse() returns 1xx interim responses (100 Continue) as messages of
 * their own, so a test can react to them.
 */
export class KeepAliveClient {
  readonly socket: net.Socket;
  /** Resolves once connected; rejects on connect failure. */
  readonly ready: Promise<void>;
  /** Resolves when the connection is closed by either side (never rejects; see closeError). */
  readonly closed: Promise<void>;
  /** The server sent FIN (or the connection is gone). */
  ended = false;
  isClosed = false;
  closeError: Error | undefined;
  private buf: Buffer = Buffer.alloc(0);
  private waiters: Array<() => void> = [];

  constructor(target: Target, opts: { host?: string } = {}) {
    this.socket = net.connect({ ...connectOpts(target, opts.host ?? '127.0.0.1'), allowHalfOpen: true });
    this.ready = new Promise<void>((resolve, reject) => {
      this.socket.once('connect', () => resolve());
      this.socket.once('error', (e) => reject(e));
    });
    this.ready.catch(() => {});
    this.closed = new Promise<void>((resolve) => {
      this.socket.once('close', () => {
        this.isClosed = true;
        this.ended = true;
        this.wake();
        resolve();
      });
    });
    this.socket.on('error', (e) => {
      this.closeError = e;
    });
    this.socket.on('data', (b: Buffer) => {
      this.buf = Buffer.concat([this.buf, b]);
      this.wake();
    });
    this.socket.on('end', () => {
      this.ended = true;
      this.wake();
    });
  }

  static async connect(target: Target, opts: { host?: string } = {}): Promise<KeepAliveClient> {
    const c = new KeepAliveClient(target, opts);
    await c.ready;
    return c;
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private waitForData(deadline: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const t = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()));
      this.waiters.push(() => {
        clearTimeout(t);
        resolve(true);
      });
    });
  }

  /** Write bytes; resolves when handed to the kernel. */
  async send(data: string | Buffer): Promise<void> {
    await this.ready;
    await new Promise<void>((resolve, reject) => this.socket.write(data, (err) => (err ? reject(err) : resolve())));
  }

  /** Bytes received and not yet consumed by readResponse(). */
  buffered(): Buffer {
    return this.buf;
  }

  /** Take (and consume) all buffered bytes. */
  takeBuffered(): Buffer {
    const b = this.buf;
    this.buf = Buffer.alloc(0);
    return b;
  }

  /** Wait for, parse and consume the next response message (a 1xx is returned on its own). */
  async readResponse(opts: ParseOptions & { timeoutMs?: number } = {}): Promise<ParsedResponse> {
    const deadline = Date.now() + (opts.timeoutMs ?? 5000);
    for (;;) {
      const msg = parseNext(this.buf, { head: opts.head, eof: this.ended && this.buf.length > 0 });
      if (msg) {
        this.buf = this.buf.subarray(msg.length);
        msg.response.rest = Buffer.from(this.buf);
        return msg.response;
      }
      if (this.ended) {
        throw new Error(`connection closed by server before a response${this.closeError ? ` (${this.closeError.message})` : ''}`);
      }
      if (!(await this.waitForData(deadline))) {
        throw new Error(
          `readResponse: timeout; ${this.buf.length} bytes buffered` +
            (this.buf.length ? `: ${JSON.stringify(this.buf.subarray(0, 300).toString('latin1'))}` : ''),
        );
      }
    }
  }

  /** True if the server closed the connection within timeoutMs. */
  async waitForClose(timeoutMs = 5000): Promise<boolean> {
    if (this.ended) return true;
    const deadline = Date.now() + timeoutMs;
    while (!this.ended) {
      if (!(await this.waitForData(deadline)) && !this.ended) return false;
    }
    return true;
  }

  /** Half-close our side (FIN) but keep reading. */
  end(): void {
    this.socket.end();
  }

  /** Destroy the connection. */
  async close(): Promise<void> {
    this.socket.destroy();
    await this.closed;
  }
}

/**
 * Reading the client's request body, for every module that needs it
 * (nginx's ngx_http_request_body.c): sends `100 Continue` when the body is
 * first read, enforces `client_max_body_size` on chunked bodies (413) and
 * `client_body_timeout` between reads (408), keeps bodies up to
 * `client_body_buffer_size` in memory and writes larger ones to a temporary
 * file in `client_body_temp_path` (always, with `client_body_in_file_only`).
 * A body is read once per request; internal redirects see the same body.
 * Unbuffered readers (`proxy_request_buffering off`) get the chunks as they
 * arrive, with backpressure.
 */
import fs from 'node:fs';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import { DONE } from './http-conf.ts';
import { coreLoc, CORE_LOC_DEFAULTS } from './core/settings.ts';
import type { HttpRequest } from './request.ts';
import { requestLog } from './request-log.ts';
import type { HttpVariable } from './http-conf.ts';
import type { BodyListener } from './request-body-source.ts';

export interface RequestBody {
  /** The body in memory, in order (empty when it is in `file`). */
  bufs: Buffer[];
  length: number;
  /** The temporary file holding the body, if it was written to one. */
  file: string | undefined;
}

/** Receives an unbuffered body as it arrives. */
export interface BodyConsumer {
  bodyData(chunk: Buffer): void;
  bodyEnd(): void;
  /** Reading failed: 408 (timeout), 413 (too large), 400 (bad framing) or 499 (client closed). */
  bodyError(status: number): void;
}

interface BodyState {
  continueSent?: boolean;
  body?: RequestBody;
  reading?: Promise<RequestBody | number>;
  /** The body was handed to an unbuffered reader and cannot be read again. */
  streamed?: boolean;
}

const states = new WeakMap<HttpRequest, BodyState>();

/**
 * Whose body a request reads: a subrequest has its parent's (nginx's
 * sr->request_body = r->request_body) unless it was given one of its own
 * (setSubrequestBody: the only way a subrequest gets a state).
 */
function owner(r: HttpRequest): HttpRequest {
  while (r.parent && !states.has(r)) r = r.parent;
  return r;
}

function stateOf(r: HttpRequest): BodyState | undefined {
  return states.get(owner(r));
}

function createState(r: HttpRequest): BodyState {
  r = owner(r);
  let st = states.get(r);
  if (!st) states.set(r, (st = {}));
  return st;
}

/**
 * A subrequest reads `bufs` as its body, already read, instead of its
 * parent's (an empty list: no body at all).
 */
export function setSubrequestBody(sr: HttpRequest, bufs: Buffer[]): void {
  states.set(sr, { body: { bufs, length: bufs.reduce((n, b) => n + b.length, 0), file: undefined } });
}

/** Whether the request announces a body (Content-Length > 0 or chunked; an HTTP/2 stream with data but no length counts as chunked). */
export function hasRequestBody(r: HttpRequest): boolean {
  // or a body given after the head said none (ngx.req.set_body_data/set_body_file)
  return r.head.chunked || r.head.contentLength > 0 || (stateOf(r)?.body?.length ?? 0) > 0;
}

/** Whether the body is sent chunked (the head reader refused any other Transfer-Encoding). */
export function isChunked(r: HttpRequest): boolean {
  return r.head.chunked;
}

/** The body read so far by readRequestBody, if any. */
export function requestBodyOf(r: HttpRequest): RequestBody | undefined {
  return stateOf(r)?.body;
}

/** The body read becomes `bufs`, and Content-Length says so (ngx.req.set_body_data and friends, request-validation). */
export function replaceBody(r: HttpRequest, body: RequestBody, bufs: Buffer[]): void {
  body.bufs = bufs;
  body.length = bufs.reduce((n, b) => n + b.length, 0);
  body.file = undefined;
  const list = r.headersIn;
  for (let i = list.length - 2; i >= 0; i -= 2) {
    const n = list[i].toLowerCase();
    if (n === 'content-length' || n === 'transfer-encoding') list.splice(i, 2);
  }
  list.push('Content-Length', String(body.length));
}

/**
 * A request that announces no body has read its empty one, as nginx's
 * ngx_http_read_client_request_body leaves an empty r->request_body (the
 * proxy reads every request's body, so a Lua balancer may set one).
 */
export function noBodyToRead(r: HttpRequest): void {
  const st = createState(r);
  if (!st.body && !st.reading && !st.streamed) st.body = { bufs: [], length: 0, file: undefined };
}

/** Sends `HTTP/1.1 100 Continue` when the client asked for it (ngx_http_test_expect), once. */
function sendContinue(r: HttpRequest, st: BodyState): void {
  if (st.continueSent) return;
  st.continueSent = true;
  r.testExpect();
}

let tempCounter = Math.floor(Math.random() * 1e6) + threadId * 1e7;
const madeDirs = new Set<string>();

/** Creates a temp file `dir/NNNNNNNNNN` (nginx's ngx_create_temp_file); returns path and fd. */
export function createTempFile(dir: string): { path: string; fd: number } {
  if (!madeDirs.has(dir)) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    madeDirs.add(dir);
  }
  for (;;) {
    const name = path.join(dir, String(++tempCounter % 1e10).padStart(10, '0'));
    try {
      return { path: name, fd: fs.openSync(name, 'wx+', 0o600) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

let prefix = process.cwd();

/** nginx's prefix, where default temp paths live (set when a worker starts a configuration). */
export function setTempPrefix(p: string): void {
  prefix = p;
}

/** A default temp path (`client_body_temp`, `proxy_temp`) under the prefix. */
export function defaultTempPath(name: string): string {
  return path.join(prefix, name);
}

function tempDir(r: HttpRequest): string {
  return r.level.get(coreLoc).clientBodyTempPath ?? defaultTempPath('client_body_temp');
}

const MAX_BODY = {};

/** This request's client_max_body_size from here on (APISIX-Runtime's set_client_max_body_size; 0: no limit). */
export function setClientMaxBodySize(r: HttpRequest, max: number): void {
  r.ctx.set(MAX_BODY, max);
}

/** Reads the client body with nginx's limits, calling the consumer's methods; returns controls for backpressure. */
class BodyReader implements BodyListener {
  private readonly r: HttpRequest;
  private readonly consumer: BodyConsumer;
  private readonly max: number;
  private readonly chunked: boolean;
  private received = 0;
  private timer: NodeJS.Timeout | undefined;
  private done = false;

  constructor(r: HttpRequest, consumer: BodyConsumer) {
    this.r = r;
    this.consumer = consumer;
    const core = r.level.get(coreLoc);
    this.max = (r.ctx.get(MAX_BODY) as number | undefined) ?? core.clientMaxBodySize;
    this.chunked = isChunked(r);
    // nothing left to wait for: no timer
    if (!r.body.complete) this.timer = setTimeout(this.onTimeout, core.clientBodyTimeout);
    r.body.read(this);
    this.announced();
  }

  /** nginx's chunked body filter: a chunk whose announced size takes the body past client_max_body_size is a 413 at once. */
  announced(): void {
    const chunk = this.r.body.pendingChunk;
    if (this.done || !this.chunked || !this.max || chunk === undefined || chunk.before + chunk.size <= this.max) return;
    requestLog(this.r).error(`client intended to send too large chunked body: ${chunk.before}+${chunk.size} bytes`);
    this.finish();
    this.consumer.bodyError(413);
  }

  pause(): void {
    if (this.done) return;
    this.r.body.pause();
    // no client_body_timeout while we are the ones not reading
    clearTimeout(this.timer);
  }

  resume(): void {
    if (this.done) return;
    this.timer?.refresh();
    this.r.body.resume();
  }

  private finish(): void {
    this.done = true;
    clearTimeout(this.timer);
    this.r.body.stop(this);
  }

  data(chunk: Buffer): void {
    if (this.done) return;
    this.timer?.refresh();
    this.received += chunk.length;
    // a body read counts in $request_length (a discarded one does not, as in nginx)
    this.r.bodyRead += chunk.length;
    if (this.chunked && this.max && this.received > this.max) {
      // (nginx's HTTP/2 reader words it with the total)
      const size = this.r.head.version >= 2000 ? `${this.received}` : `${this.received - chunk.length}+${chunk.length}`;
      requestLog(this.r).error(`client intended to send too large chunked body: ${size} bytes`);
      this.finish();
      this.consumer.bodyError(413);
      return;
    }
    this.consumer.bodyData(chunk);
  }

  end(): void {
    if (this.done) return;
    this.finish();
    this.consumer.bodyEnd();
  }

  error(status: number): void {
    if (this.done) return;
    this.finish();
    // a malformed chunked body (the connection logged it): nginx's 400
    if (status === 400) {
      this.consumer.bodyError(400);
      return;
    }
    requestLog(this.r).info('client prematurely closed connection while reading client request body');
    this.consumer.bodyError(499);
  }

  private onTimeout = (): void => {
    if (this.done) return;
    this.finish();
    requestLog(this.r).info('client timed out (110: Connection timed out) while reading client request body');
    this.consumer.bodyError(408);
  };
}

/** Collects a whole body in memory or a temp file (the buffered reader behind readRequestBody). */
class BodyCollector implements BodyConsumer {
  private readonly r: HttpRequest;
  private readonly limit: number;
  private readonly inFile: boolean;
  private readonly body: RequestBody = { bufs: [], length: 0, file: undefined };
  private fd = -1;
  private readonly resolve: (v: RequestBody | number) => void;

  constructor(r: HttpRequest, resolve: (v: RequestBody | number) => void) {
    this.r = r;
    this.resolve = resolve;
    const core = r.level.get(coreLoc);
    const size = core.clientBodyBufferSize;
    const declared = r.head.contentLength;
    // nginx sizes its buffer to the whole body when it is under 1.25 × client_body_buffer_size
    this.limit = !isChunked(r) && declared >= 0 && declared < size + (size >> 2) ? declared : size;
    const only = core.clientBodyInFileOnly;
    this.inFile = only !== 'off';
  }

  bodyData(chunk: Buffer): void {
    const b = this.body;
    b.length += chunk.length;
    if (this.fd < 0 && !this.inFile && b.length <= this.limit) {
      b.bufs.push(chunk);
      return;
    }
    if (this.fd < 0 && !this.openFile()) return;
    for (const buf of b.bufs) fs.writeSync(this.fd, buf);
    b.bufs.length = 0;
    fs.writeSync(this.fd, chunk);
  }

  private openFile(): boolean {
    try {
      const t = createTempFile(tempDir(this.r));
      this.fd = t.fd;
      this.body.file = t.path;
      if (!this.inFile) requestLog(this.r).warn(`a client request body is buffered to a temporary file ${t.path}`);
      const keep = this.r.level.get(coreLoc).clientBodyInFileOnly === 'on';
      this.r.sink.onClose(() => {
        try { fs.closeSync(this.fd); } catch { /* closed */ }
        if (!keep) fs.unlink(t.path, () => undefined);
      });
      return true;
    } catch (err) {
      requestLog(this.r).crit(`open() "${tempDir(this.r)}" failed (${(err as Error).message})`);
      this.resolve(500);
      return false;
    }
  }

  bodyEnd(): void {
    if (this.inFile && this.fd < 0 && !this.openFile()) return;
    if (this.fd >= 0) for (const buf of this.body.bufs.splice(0)) fs.writeSync(this.fd, buf);
    this.resolve(this.body);
  }

  bodyError(status: number): void {
    // a client gone while its body is read is logged as nginx's reader answers it: 400 (nothing can be sent)
    this.resolve(status === 408 || status === 499 ? terminate(this.r, status === 499 ? 400 : status) : status);
  }
}

/**
 * A body that timed out or whose client went away ends the request without
 * a response (nginx's ngx_http_terminate_request): the status is logged, the
 * connection closed. Returns DONE for the caller to hand back.
 */
export function terminate(r: HttpRequest, status: number): number {
  if (!r.sink.headersSent) r.status = status;
  r.sink.abort();
  return DONE;
}

/**
 * Reads the whole request body (ngx_http_read_client_request_body). Resolves
 * with the body, or with an HTTP status when reading failed (413, 400, 500),
 * or DONE when the request was terminated (timeout, client gone). Reading
 * twice gives the same body.
 */
export function readRequestBody(r: HttpRequest): Promise<RequestBody | number> {
  const st = createState(r);
  if (st.body) return Promise.resolve(st.body);
  if (st.reading) return st.reading;
  if (st.streamed) return Promise.resolve({ bufs: [], length: 0, file: undefined });
  sendContinue(r, st);
  const state = st;
  state.reading = new Promise<RequestBody | number>((resolve) => {
    const done = (v: RequestBody | number) => {
      state.reading = undefined;
      if (typeof v !== 'number') state.body = v;
      resolve(v);
    };
    new BodyReader(r, new BodyCollector(r, done));
  });
  return state.reading;
}

/** Starts passing the body to `consumer` as it arrives; returns pause/resume controls. */
export function streamRequestBody(r: HttpRequest, consumer: BodyConsumer): { pause(): void; resume(): void } {
  const st = createState(r);
  st.streamed = true;
  sendContinue(r, st);
  return new BodyReader(r, consumer);
}

/**
 * How far the body was taken, for ngx.req.socket's checks: not at all, a
 * read in progress, read whole, or handed to a reader of its own (claimed).
 */
export function bodyTaken(r: HttpRequest): 'no' | 'reading' | 'read' | 'claimed' {
  const st = stateOf(r);
  return st?.body ? 'read' : st?.reading ? 'reading' : st?.streamed ? 'claimed' : 'no';
}

/**
 * The body goes to a reader of its own that takes it from `r.body` itself
 * (ngx.req.socket): readRequestBody gives an empty body from now on, as
 * nginx's r->request_body then exists. `expect`: answer `Expect:
 * 100-continue` first.
 */
export function claimRequestBody(r: HttpRequest, expect: boolean): void {
  const st = createState(r);
  st.streamed = true;
  if (expect) sendContinue(r, st);
}

function bodyText(r: HttpRequest): string | undefined {
  const b = stateOf(r)?.body;
  if (!b || b.file !== undefined || b.bufs.length === 0) return undefined;
  return b.bufs.length === 1 ? b.bufs[0].toString('latin1') : Buffer.concat(b.bufs).toString('latin1');
}

/** `$request_body` and `$request_body_file` (ngx_http_variables.c). */
export const requestBodyVariables: HttpVariable[] = [
  { name: 'request_body', noCache: true, get: bodyText },
  { name: 'request_body_file', noCache: true, get: (r) => stateOf(r)?.body?.file },
];

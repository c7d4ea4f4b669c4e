/**
 * What ngx.say/ngx.print write, held as nginx's write filter holds it: the
 * head and the body stay in the request until 1460 bytes (postpone_output's
 * default) are waiting, ngx.flush is called, or the response ends. So a hook
 * that fails after a small ngx.say closes the connection with nothing sent,
 * as OpenResty does, and small outputs go out in one write. For Lua the head
 * counts as sent from the first output on (ngx.header and ngx.status then
 * refuse, ngx.exit ends the body).
 */
import { contentTypeFor } from '../../core/types.ts';
import type { HttpRequest } from '../../request.ts';
import { bodyDrained, sendPieces, sendHeader } from '../../response.ts';
import { luaLoc } from './conf.ts';
import { requestLog } from '../../request-log.ts';

/** nginx's postpone_output default. */
const POSTPONE = 1460;

interface Output {
  pending: Buffer[];
  size: number;
  /** lua_http10_buffering: the whole body is held (decided at the first output). */
  buffering?: boolean;
  /** ngx.req.socket(true) took the connection: Lua writes the response itself. */
  raw?: boolean;
  /** Some output had bytes (OpenResty's ctx->seen_body_data: ngx.flush() has something to flush). */
  seenBody?: boolean;
}

/** The key of the request's Output in r.ctx (a WeakMap entry per request cost about 1.5 µs). */
const OUTPUT = {};
const outputOfOrNone = (r: HttpRequest) => r.ctx.get(OUTPUT) as Output | undefined;

/** The request's held output, made on first use (from then on the head counts as sent for Lua). */
function outputOf(r: HttpRequest): Output {
  let out = outputOfOrNone(r);
  if (!out) r.ctx.set(OUTPUT, (out = { pending: [], size: 0 }));
  return out;
}

/** Status and Content-Type before the head, as ngx_http_lua_send_header_if_needed sets them. */
export function prepareHeader(r: HttpRequest): void {
  if (!r.status) r.status = 200;
  // a 304 gets no default Content-Type (ngx_http_lua_set_content_type)
  if (r.contentType === undefined && r.status !== 304 && r.level.get(luaLoc).useDefaultType !== false) r.contentType = contentTypeFor(r);
}

/** Whether the response head counts as sent for Lua (written, or output is waiting to be). */
export function headStarted(r: HttpRequest): boolean {
  return r.headerSent || r.ctx.has(OUTPUT);
}

/**
 * Whether the head went out for a response without a body (nginx's r->header_only, set by
 * the header filter for HEAD, 204 and 304): ngx.say/print/flush then answer `header only`.
 */
export function headerOnly(r: HttpRequest): boolean {
  return headStarted(r) && (r.method === 'HEAD' || r.status === 204 || r.status === 304);
}

/** What is waiting, taken (the pieces as ngx.say and ngx.print gave them). */
function takePending(r: HttpRequest): Buffer[] | undefined {
  const out = outputOfOrNone(r);
  if (!out || out.size === 0) return undefined;
  const pieces = out.pending;
  out.pending = [];
  out.size = 0;
  return pieces;
}

/** Sends the head if it is not out yet, then runs `then`; a promise when a header filter waits. */
function withHead<T>(r: HttpRequest, then: () => T): T | Promise<Awaited<T>> {
  if (r.headerSent) return then();
  prepareHeader(r);
  const sent = sendHeader(r);
  return sent ? sent.then(then) as Promise<Awaited<T>> : then();
}

/** Whether ngx.flush() has something to flush: a head started, and body bytes seen unless the flush waits. */
export function somethingToFlush(r: HttpRequest, wait: boolean): boolean {
  return headStarted(r) && (wait || outputOfOrNone(r)?.seenBody === true);
}

/** Whether an HTTP/1.0 response is being held whole (ngx.flush is then a no-op, as OpenResty logs). */
export function buffering(r: HttpRequest): boolean {
  if (outputOfOrNone(r)?.buffering !== true) return false;
  requestLog(r).debug('lua http 1.0 buffering makes ngx.flush() a no-op');
  return true;
}

/**
 * Sends the head and what is waiting; a promise when the writer must wait.
 * `flushBuf` (ngx.flush): nginx's flush buffer follows, which body filters
 * see as an empty piece.
 */
export function flushOutput(r: HttpRequest, flushBuf = false): Promise<void> | undefined {
  if (outputOf(r).buffering) return undefined;
  const send = (): Promise<void> | undefined => {
    const pieces = takePending(r);
    if (r.method !== 'HEAD' && (pieces !== undefined || (flushBuf && r.bodyFilters !== 0))) {
      return sendPieces(r, pieces ?? [], false, flushBuf) ? undefined : bodyDrained(r);
    }
    // a flush sends the head held since ngx.send_headers (nginx's write filter writes it on a flush buf)
    if (!r.parent) r.sink.flushHead();
    return undefined;
  };
  return withHead(r, send) as Promise<void> | undefined;
}

/**
 * ngx.send_headers: the header filters run now (header_filter_by_lua sees the
 * response as nginx's ngx_http_send_header gives it), and the head is held by
 * the sink until the first output or the end. A promise when a filter waits.
 */
export function startHead(r: HttpRequest): Promise<void> | undefined {
  outputOf(r).buffering ??= false;
  prepareHeader(r);
  return withHead(r, () => undefined) as Promise<void> | undefined;
}

/** ngx.say/ngx.print: holds `data`, and sends once enough is waiting. */
export function writeOutput(r: HttpRequest, data: Buffer): Promise<void> | undefined {
  const out = outputOf(r);
  // the head counts as sent: ngx.header.content_type now reads default_type's, as OpenResty's does
  if (!r.headerSent) prepareHeader(r);
  // OpenResty holds an HTTP/1.0 response whole to give it a Content-Length (lua_http10_buffering)
  out.buffering ??= !r.headerSent && r.head.version < 1001 && r.contentLength === undefined
    && r.level.get(luaLoc).http10Buffering !== false;
  if (data.length) {
    out.seenBody = true;
    out.pending.push(data);
    out.size += data.length;
  }
  if (out.buffering) {
    requestLog(r).debug('lua buffering output bufs for the HTTP 1.0 request');
    return undefined;
  }
  return out.size >= POSTPONE ? flushOutput(r) : undefined;
}

/**
 * Why ngx.req.socket(true) cannot take the connection now, or undefined:
 * output is held whole for HTTP/1.0, or what went to the socket is not all
 * written to the client yet (OpenResty's c->buffered).
 */
export function rawRefusal(r: HttpRequest): string | undefined {
  const out = outputOfOrNone(r);
  if (out?.buffering) return 'http 1.0 buffering';
  const socket = r.sink.socket;
  // only what the socket could not take counts (c->buffered): output still held is dropped, as nginx drops what it postponed
  if (socket && socket.writableLength > 0) return 'pending data to write';
  return undefined;
}

/**
 * ngx.req.socket(true) took the connection: no head goes out from now on
 * (nginx's r->header_sent is set), nor any output of ngx.say and friends,
 * and the connection closes after the request.
 */
export function takeRawOutput(r: HttpRequest): void {
  outputOf(r).raw = true;
  takePending(r);
  r.sink.giveUpFraming?.();
  r.headerSent = true;
  r.keepalive = false;
}

/** Whether ngx.req.socket(true) took the connection (ngx.say/print/flush/eof: `raw request socket acquired`). */
export function rawOutput(r: HttpRequest): boolean {
  return outputOfOrNone(r)?.raw === true;
}

/** Ends the response: the head if still held, what is waiting, and the end of the body. */
export function finishOutput(r: HttpRequest): Promise<void> | undefined {
  const out = outputOf(r);
  // what Lua sent over a raw request socket is the response: the sink only ends (nothing goes through the filters)
  if (out.raw) {
    r.sink.end();
    return undefined;
  }
  // (a HEAD response held whole gets no Content-Length: OpenResty sends its head as it is)
  if (out.buffering && !r.headerSent && r.method !== 'HEAD') r.contentLength = out.size;
  const rc = withHead(r, () => {
    const pieces = takePending(r);
    sendPieces(r, pieces === undefined || r.method === 'HEAD' ? [] : pieces, true);
  });
  return rc instanceof Promise ? rc : undefined;
}

/** A hook failed: what was held is dropped, the connection closed (nginx's NGX_ERROR). */
export function dropOutput(r: HttpRequest): void {
  takePending(r);
  r.sink.abort();
}

/**
 * Sending a response: the header filter chain, the response head in nginx's
 * header order, nginx's special pages, and finishing a request.
 */
import { coreLoc, CORE_LOC_DEFAULTS } from './core/settings.ts';
import { absoluteLocation } from './redirect.ts';
import { cancelBodyDrain, EMPTY_CHUNK, nextBodyFilter, waitBodyDrain } from './body-filter.ts';
import type { HttpRequest } from './request.ts';
import type { HeaderFilter } from './http-conf.ts';
import { CONN_CLOSE, CONN_NONE, UA_CHROME, UA_MSIE, UA_MSIE6, UA_SAFARI } from './request-head.ts';
import { closesConnection, pageTails, serverSignature, refreshPage, specialPage, statusLineReason, wireStatus } from './special-response.ts';

let cachedDate = '';
let cachedDateSec = 0;

/** `Date` header value, formatted once per second. */
export function httpDate(ms = Date.now()): string {
  const sec = Math.floor(ms / 1000);
  if (sec !== cachedDateSec) {
    cachedDateSec = sec;
    cachedDate = new Date(sec * 1000).toUTCString();
  }
  return cachedDate;
}

/**
 * Whether the connection stays open after this response (nginx's
 * r->keepalive): asked for by the request, allowed by the location's
 * keepalive settings, and not after an error nginx closes on.
 */
function keepAlive(r: HttpRequest): boolean {
  const head = r.head;
  if (head.error || r.conn.closing || r.conn.keepaliveDisabled) return false;
  if (head.connection === CONN_CLOSE || (head.connection === CONN_NONE && head.version <= 1000)) return false;
  const core = r.level.get(coreLoc);
  if (core.keepaliveTimeout === 0) return false;
  if (r.conn.requests >= core.keepaliveRequests) return false;
  if (Date.now() - r.conn.startMs > core.keepaliveTime) return false;
  const disable = core.keepaliveDisable;
  // MSIE may wait a while after a POST answered on a keepalive connection; Safari may send a POST to a closed one
  if (disable.length && ((r.method === 'POST' && disable.includes('msie6') && head.userAgent & UA_MSIE6)
    || (disable.includes('safari') && head.userAgent & UA_SAFARI))) return false;
  return !(r.errStatus && closesConnection(r.errStatus));
}

function noBody(r: HttpRequest, status: number): boolean {
  return r.method === 'HEAD' || status === 204 || status === 304 || status < 200;
}

/**
 * Runs the header filters and writes the response head. After this, body
 * bytes go through sendBody/endBody.
 */
export function sendHeader(r: HttpRequest): Promise<void> | undefined {
  if (r.headerSent) return undefined;
  r.headerSent = true;
  // a response to an error (error_page target) keeps the error's status (nginx's r->err_status)
  if (r.errStatus) r.status = r.errStatus;
  // a subrequest runs only the filters made for subrequests (most of nginx's skip them), and its head goes nowhere
  const filters = r.parent ? r.main.subrequestHeaderFilters : r.main.headerFilters;
  // synchronous unless a filter is (a promise per response otherwise)
  for (let i = 0; i < filters.length; i++) {
    const p = filters[i](r);
    if (p) return p.then(() => filtersFrom(r, filters, i + 1));
  }
  headerFiltered(r);
  return undefined;
}

/**
 * Sends the head, then runs `next`: in the same turn unless a header filter
 * waits. `failed` gets an error of the filters or of writing the head.
 */
export function sendHeaderThen(r: HttpRequest, next: () => void, failed: (err: Error) => void): void {
  let sent: Promise<void> | undefined;
  try {
    sent = sendHeader(r);
  } catch (err) {
    failed(err as Error);
    return;
  }
  if (sent) sent.then(next, failed);
  else next();
}

async function filtersFrom(r: HttpRequest, filters: HeaderFilter[], from: number): Promise<void> {
  for (let i = from; i < filters.length; i++) {
    const p = filters[i](r);
    if (p) await p;
  }
  headerFiltered(r);
}

function headerFiltered(r: HttpRequest): void {
  if (r.parent) return;
  // nginx has read or discarded the body before answering: that sends 100 Continue
  r.testExpect();
  // HTTP/0.9: no response head at all
  if (!r.http09) writeHead(r);
}

function writeHead(r: HttpRequest): void {
  const status = wireStatus(r.status || 200);
  const core = r.level.get(coreLoc);
  const raw: string[] = [];
  if (!r.ownServer) raw.push('Server', serverSignature(core.serverTokens));
  if (!r.ownDate) raw.push('Date', httpDate());
  // nginx sends no Content-Type with 204
  if (r.contentType !== undefined && status !== 204) raw.push('Content-Type', r.contentType);
  const bodyless = noBody(r, status);
  // a 304 of the not_modified filter has no length (it clears it); `return 304` keeps nginx's 0
  if (r.contentLength !== undefined && status !== 204) raw.push('Content-Length', String(r.contentLength));
  // nginx drops Last-Modified from any other status (an error page served from a file)
  if (r.lastModified !== undefined && (status === 200 || status === 206 || status === 304)) {
    raw.push('Last-Modified', new Date(r.lastModified).toUTCString());
  }
  // a relative Location made absolute goes here; any other stays in header order (nginx's header filter)
  let location = r.location;
  if (location !== undefined) {
    const absolute = absoluteLocation(r, location);
    if (absolute !== location) {
      raw.push('Location', absolute);
      r.location = absolute;
      location = undefined;
    }
  }
  const chunked = r.contentLength === undefined && !bodyless && r.httpVersion !== '1.0'
    && core.chunkedTransferEncoding;
  // without a length or chunking, the end of the body is the end of the connection
  const keep = keepAlive(r) && (r.contentLength !== undefined || bodyless || chunked);
  r.keepalive = keep;
  r.chunked = chunked;
  if (chunked) raw.push('Transfer-Encoding', 'chunked');
  raw.push('Connection', status === 101 ? 'upgrade' : keep ? 'keep-alive' : 'close');
  if (keep && status !== 101 && core.keepaliveHeader) raw.push('Keep-Alive', `timeout=${Math.floor(core.keepaliveHeader)}`);
  if (location !== undefined) raw.push('Location', location);
  for (const h of r.headersOut) raw.push(h.name, h.value);
  r.sink.sendHead(status, r.statusReason ?? statusLineReason(status), raw, chunked);
}

/**
 * Writes body bytes through the body filters; false when the writer should
 * wait (waitBodyDrain, src/http/body-filter.ts).
 */
export function sendBody(r: HttpRequest, chunk: Buffer): boolean {
  r.bodyBytesSent += chunk.length;
  return nextBodyFilter(r, undefined, chunk, false);
}

/** Ends the response body, with its last bytes. */
export function endBody(r: HttpRequest, chunk?: Buffer): void {
  if (chunk !== undefined) r.bodyBytesSent += chunk.length;
  nextBodyFilter(r, undefined, chunk ?? EMPTY_CHUNK, true);
}

/**
 * Sends pieces a handler held (ngx.say's, echo's) as nginx's handlers send
 * their chain links: with a body filter in the request, one call per piece
 * and, with `last`, a last buffer of its own (body_filter_by_lua sees each,
 * then `"", true`); with none, one write of them all (the sink sees the same
 * bytes). `flush` (ngx.flush, echo_flush): the filters then see an empty
 * piece after them, nginx's flush buffer. False when the writer should wait
 * (bodyDrained).
 */
export function sendPieces(r: HttpRequest, pieces: Buffer[], last: boolean, flush = false): boolean {
  if (r.bodyFilters === 0) {
    const data = pieces.length === 1 ? pieces[0] : Buffer.concat(pieces);
    if (last) endBody(r, data.length ? data : undefined);
    return last || data.length === 0 || sendBody(r, data);
  }
  let ok = true;
  for (const piece of pieces) if (piece.length && !sendBody(r, piece)) ok = false;
  if (flush && !last && !sendBody(r, EMPTY_CHUNK)) ok = false;
  if (last) endBody(r);
  return ok;
}

/** Resolves once the body filters and the client can take more, or the client is gone. */
export function bodyDrained(r: HttpRequest): Promise<void> {
  return new Promise((resolve) => {
    const fn = () => resolve();
    waitBodyDrain(r, fn);
    r.sink.onClose(() => { cancelBodyDrain(r, fn); resolve(); });
  });
}

/** Sends a complete response with a small in-memory body. */
export async function sendSimple(r: HttpRequest, status: number, body: string | Buffer, contentType?: string): Promise<void> {
  r.status = status;
  const buf = typeof body === 'string' ? Buffer.from(body, 'latin1') : body;
  if (contentType !== undefined) r.contentType = contentType;
  r.contentLength = buf.length;
  await sendHeader(r);
  endBody(r, r.method === 'HEAD' ? undefined : buf);
}

/** nginx's own page for `status` (ngx_http_special_response_handler without error_page). */
export async function sendSpecialResponse(r: HttpRequest, status: number): Promise<void> {
  const core = r.level.get(coreLoc);
  const ua = r.head.userAgent;
  if (core.msieRefresh && ua & UA_MSIE && (status === 301 || status === 302) && r.location !== undefined) {
    // msie_refresh: a page that refreshes to the new location, sent as 200
    const page = refreshPage(r.location);
    r.location = undefined;
    r.setHeader('ETag', undefined);
    r.setHeader('Accept-Ranges', undefined);
    r.lastModified = undefined;
    r.errStatus = 0;
    await sendSimple(r, 200, page, 'text/html');
    return;
  }
  const padding = core.msiePadding && (ua & (UA_MSIE | UA_CHROME)) !== 0 && r.head.version >= 1000;
  const page = specialPage(status, core.serverTokens, padding, pageTails.get(r.server));
  // nginx keeps the headers set so far (WWW-Authenticate, Content-Range) and drops only these
  r.setHeader('ETag', undefined);
  r.setHeader('Accept-Ranges', undefined);
  r.lastModified = undefined;
  r.status = status;
  r.statusReason = undefined;
  if (status < 300 || status >= 400) r.location = undefined;
  if (page === undefined) {
    r.contentLength = 0;
    r.contentType = undefined;
    await sendHeader(r);
    endBody(r);
    return;
  }
  await sendSimple(r, status, page, 'text/html');
}

/**
 * One HTTP request as the phase engine and modules see it (nginx's
 * ngx_http_request_t): the client's request, the chosen server and location,
 * the variable cache, and the response being built.
 */
import type { Level } from '../conf/context.ts';
import type { HttpMainConf, LocationConf, PhaseHandler, ServerConf } from './http-conf.ts';
import type { HttpConnection } from './connection.ts';
import { applyMatch } from './regex.ts';
import { RequestHead } from './request-head.ts';
import type { VarValue } from '../core/variables.ts';
import type { BodySink, ResponseSink } from './response-sink.ts';
import type { RequestBodySource } from './request-body-source.ts';

/** A response header as it will be sent (name in its written case). */
export interface OutHeader {
  name: string;
  value: string;
}

export class HttpRequest {
  /** Where the response goes (HTTP/1 socket, HTTP/2 stream, subrequest buffer). */
  readonly sink: ResponseSink;
  /** The request body as it arrives (read it with src/http/request-body.ts). */
  readonly body: RequestBodySource;
  /** Request headers as read, name and value in turn (names as the client sent them; HTTP/2's lowercase). */
  readonly headersIn: string[];
  readonly conn: HttpConnection;
  readonly main: HttpMainConf;
  server: ServerConf;
  loc: LocationConf;
  /** Module configuration at the current location: `r.level.get(slot)`. */
  level: Level;
  /**
   * The content handler that will answer (nginx's r->content_handler): the
   * location's; an `if` or `limit_except` block without one of its own keeps it.
   */
  contentHandler: PhaseHandler | undefined;

  /** The request head as read (request line, host, port, version, length). */
  readonly head: RequestHead;
  /** Method as sent (`GET`); error_page may turn it into GET. */
  method: string;
  /** `1.0`, `1.1` (any 1.x from 1.1 on), `0.9` or `2.0`. */
  readonly httpVersion: string;
  /** The request target as sent, unmodified (`$request_uri`). */
  readonly requestUri: string;
  /** Decoded, normalized path (`$uri`); changed by rewrite and internal redirects. */
  uri: string;
  /** Query string without `?` (`$args`). */
  args: string;
  /** Whether the request target had a `?` (even an empty query). */
  hasArgs: boolean;
  /** Host from the request line or Host header, lowercased, port stripped (empty when none). */
  host: string;

  /** Per-request variable values, indexed by the registry. */
  varCache: VarValue[] = [];
  /** Regex captures ($0..$9) of the last matching regex (location, rewrite, if, server_name). */
  captures: string[] | undefined;
  /** Module contexts (nginx's r->ctx), keyed by whatever object the module chooses. */
  readonly ctx = new Map<object, unknown>();

  /** Response status (nginx's r->headers_out.status). */
  status = 0;
  readonly headersOut: OutHeader[] = [];
  contentType: string | undefined;
  contentLength: number | undefined;
  lastModified: number | undefined;
  location: string | undefined;
  /**
   * Where the end of the body filter chain writes (src/http/body-filter.ts):
   * the client response, or a subrequest's sink.
   */
  out: BodySink;
  /** The body filters this request's body goes through, as bits of their chain positions. */
  bodyFilters = 0;
  /** The writer of the body waits for the chain to take more (waitBodyDrain). */
  drainHandler: (() => void) | undefined;
  /** The sink asked to wait; its 'drain' resumes the chain. */
  sinkWaiting = false;
  sinkDrained: (() => void) | undefined;
  headerSent = false;
  /** Set once the response is complete (or the request was aborted). */
  finished = false;

  /**
   * The request that started this one as a subrequest (nginx's r->parent,
   * src/http/subrequest.ts); undefined for a client's request.
   */
  parent: HttpRequest | undefined;
  /**
   * nginx's r->post_subrequest: called as a subrequest is finalized before
   * its head went out; true when it took the finalization over (src/http/subrequest.ts).
   */
  postSubrequest: ((sr: HttpRequest, rc: number) => boolean | Promise<boolean>) | undefined = undefined;
  /** Request went through an internal redirect, rewrite-last, error_page or named location. */
  internal = false;
  /** Set by rewrite handlers when they changed `uri` (location selection runs again). */
  uriChanged = false;
  /**
   * nginx's r->valid_location: cleared when `rewrite ... break` (or `break`
   * after a rewrite) changed the URI; proxy_pass with a URI part then sends
   * the rewritten URI as is instead of replacing the location's prefix.
   */
  validLocation = true;
  /** Remaining internal redirects before nginx's "rewrite or internal redirection cycle". */
  uriChanges = 11;
  /** `error_page` already handled once (recursive_error_pages off). */
  errorPageDone = false;
  /** The status the original request failed with, when an error page is being served. */
  errStatus = 0;

  /** Wall-clock start in ms, and monotonic start for $request_time. */
  readonly startMs: number;
  readonly startHr: bigint;
  /** Bytes of the response body sent to the client so far. */
  bodyBytesSent = 0;
  /** Reason phrase sent instead of nginx's own: a proxied response keeps its upstream's (nginx's status_line). */
  statusReason: string | undefined;
  /** Server / Date are in headersOut (proxy_pass_header): nginx's own are not sent. */
  ownServer = false;
  ownDate = false;
  /** The request's upstream tries behind `$upstream_*`, kept across internal redirects (src/http/upstream/module.ts). */
  upstreamRecord: object | undefined;
  /** nginx's r->disable_not_modified: an upstream response that is not cached skips the not_modified filter. */
  disableNotModified = false;
  /** This request's number on its connection (`$connection_requests`). */
  readonly connectionRequests: number;
  /** Arrived while an earlier request on the connection was still being answered (`$pipe`). */
  readonly pipelined: boolean;
  /** The request line as received (`$request`). */
  rawRequestLine: string | undefined;
  /** The connection stays open after this response (nginx's r->keepalive, settled when the head is sent). */
  keepalive = false;
  /** The response body goes out chunked (nginx's r->chunked). */
  chunked = false;
  /** The request body's chunked framing broke (nginx's 400 when found before the request runs). */
  bodyError = 0;
  /** Body bytes received so far ($request_length counts them after the head). */
  bodyRead = 0;
  /** The whole response went out ($request_completion). */
  completed = false;
  /** `set $limit_rate`: bytes per second for this request, over the location's limit_rate. */
  limitRate: number | undefined;
  /**
   * The client's address as realip found it (nginx replaces c->sockaddr and
   * c->addr_text until the request ends); undefined when unchanged.
   */
  realAddress: { text: string; port: number } | undefined;

  /** The client's address as modules see it (`$remote_addr`): realip's, a subrequest's parent's, else the connection's. */
  get remoteAddress(): string {
    return this.realAddress?.text ?? this.parent?.remoteAddress ?? this.conn.remoteAddress;
  }

  /** The client's port (`$remote_port`; 0 when unknown), as remoteAddress. */
  get remotePort(): number {
    return this.realAddress?.port ?? this.parent?.remotePort ?? this.conn.remotePort;
  }

  constructor(conn: HttpConnection, main: HttpMainConf, server: ServerConf, head: RequestHead, headersIn: string[],
    sink: ResponseSink, body: RequestBodySource) {
    this.conn = conn;
    this.main = main;
    this.server = server;
    this.loc = server.serverLoc;
    this.level = server.level;
    this.headersIn = headersIn;
    this.sink = sink;
    this.out = sink;
    this.body = body;
    this.head = head;
    this.method = this.head.method;
    const v = this.head.version;
    this.httpVersion = v >= 2000 ? '2.0' : v >= 1001 ? '1.1' : v === 1000 ? '1.0' : '0.9';
    this.requestUri = this.head.target;
    this.rawRequestLine = this.head.line;
    this.args = this.head.args;
    this.hasArgs = this.args !== '';
    this.uri = this.head.uri;
    this.host = this.head.host;
    // a server_name regex: its captures, and named captures as variables
    const m = this.head.match;
    if (m?.match) applyMatch(this, m.match, m.named);
    this.startMs = Date.now();
    this.startHr = process.hrtime.bigint();
    this.connectionRequests = conn.requests;
    this.pipelined = this.head.pipelined;
  }

  /** `$request_length`: the head as received and the body bytes read. */
  get requestLength(): number {
    return this.head.length + this.bodyRead;
  }

  /** The client closed its side (FIN) while the request was being processed. */
  clientGone = false;
  private goneListeners: Array<() => void> | undefined;

  /**
   * Calls `fn` if the client closes its side while the request waits
   * (nginx's ngx_http_test_reading: auth_delay, limit_req delays end as 499).
   */
  onClientGone(fn: () => void): void {
    if (this.clientGone) fn();
    else (this.goneListeners ??= []).push(fn);
  }

  /** The connection saw the client's FIN. */
  clientClosed(): void {
    if (this.clientGone) return;
    this.clientGone = true;
    const list = this.goneListeners;
    this.goneListeners = undefined;
    if (list) for (const fn of list) fn();
  }

  /** `100 Continue` was sent, or must not be any more (nginx's r->expect_tested). */
  expectTested = false;

  /**
   * Sends `HTTP/1.1 100 Continue` once, when the client asked for it with
   * exactly `Expect: 100-continue` (ngx_http_test_expect): called when the
   * body is about to be read or discarded.
   */
  testExpect(): void {
    if (this.expectTested) return;
    this.expectTested = true;
    if (this.head.version < 1001 || this.head.version >= 2000 || this.sink.headersSent) return;
    const expect = this.header('expect');
    if (expect !== undefined && expect.length === 12 && expect.toLowerCase() === '100-continue') this.sink.writeContinue();
  }

  /** Whether nginx answers this request without a response head (HTTP/0.9). */
  get http09(): boolean {
    return this.head.version === 9;
  }

  /** First request header named `name` (lowercase), as nginx's r->headers_in fields hold the first. */
  header(name: string): string | undefined {
    const list = this.headersIn;
    const len = name.length;
    for (let i = 0; i < list.length; i += 2) {
      const n = list[i];
      if (n.length === len && (n === name || n.toLowerCase() === name)) return list[i + 1];
    }
    return undefined;
  }

  /** Every request header named `name` (lowercase), in order. */
  headerValues(name: string): string[] {
    const list = this.headersIn;
    const out: string[] = [];
    for (let i = 0; i < list.length; i += 2) {
      const n = list[i];
      if (n.length === name.length && (n === name || n.toLowerCase() === name)) out.push(list[i + 1]);
    }
    return out;
  }

  /** Adds a response header (kept in order, duplicates allowed). */
  addHeader(name: string, value: string): void {
    this.headersOut.push({ name, value });
  }

  /** Replaces every response header named `name` (case-insensitive) with one value, or removes it. */
  setHeader(name: string, value: string | undefined): void {
    const lower = name.toLowerCase();
    for (let i = this.headersOut.length - 1; i >= 0; i--) {
      if (this.headersOut[i].name.toLowerCase() === lower) this.headersOut.splice(i, 1);
    }
    if (value !== undefined) this.headersOut.push({ name, value });
  }

  getHeader(name: string): string | undefined {
    const lower = name.toLowerCase();
    return this.headersOut.find((h) => h.name.toLowerCase() === lower)?.value;
  }

  /** Moves to location `loc` (after selection or a named-location jump). */
  setLocation(loc: LocationConf): void {
    this.loc = loc;
    this.level = loc.level;
    this.contentHandler = loc.contentHandler;
  }
}

/** A head for a request made outside the request reader (a TLS handshake's variables): `GET / HTTP/1.0`. */
export function placeholderHead(server: ServerConf): RequestHead {
  const head = new RequestHead(server);
  head.method = 'GET';
  head.target = '/';
  head.version = 1000;
  head.protocol = 'HTTP/1.0';
  head.line = 'GET / HTTP/1.0';
  head.uri = '/';
  head.args = '';
  return head;
}

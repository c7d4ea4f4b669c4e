/**
 * One HTTP request as the phase engine and modules see it (nginx's
 * ngx_http_request_t): the client's request, the chosen server and location,
 * the variable cache, and the response being built.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Writable } from 'node:stream';
import type { Level } from '../conf/context.ts';
import type { HttpMainConf, LocationConf, PhaseHandler, ServerConf } from './http-conf.ts';
import type { HttpConnection } from './connection.ts';
import type { VarValue } from './variables.ts';

/** A response header as it will be sent (name in its written case). */
export interface OutHeader {
  name: string;
  value: string;
}

export class HttpRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
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

  /** Method as sent (`GET`). */
  method: string;
  /** `1.0` or `1.1` (`0.9` never reaches here). */
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
  /** Where body bytes go; filters may wrap it. Initially the client response. */
  out: Writable;
  headerSent = false;
  /** Set once the response is complete (or the request was aborted). */
  finished = false;

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

  constructor(conn: HttpConnection, main: HttpMainConf, server: ServerConf, req: IncomingMessage, res: ServerResponse) {
    this.conn = conn;
    this.main = main;
    this.server = server;
    this.loc = server.serverLoc;
    this.level = server.level;
    this.req = req;
    this.res = res;
    this.out = res;
    this.method = req.method ?? 'GET';
    this.httpVersion = req.httpVersion;
    const target = req.url ?? '/';
    this.requestUri = target;
    const q = target.indexOf('?');
    this.hasArgs = q >= 0;
    this.args = q >= 0 ? target.slice(q + 1) : '';
    this.uri = '/';
    this.host = '';
    this.startMs = Date.now();
    this.startHr = process.hrtime.bigint();
  }

  /** First request header named `name` (lowercase). */
  header(name: string): string | undefined {
    const v = this.req.headers[name];
    return Array.isArray(v) ? v[0] : v;
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

/**
 * What a protocol module gives the upstream engine: nginx's ngx_http_upstream_t
 * callbacks (create_request, reinit_request, process_header, abort_request,
 * finalize_request, rewrite_redirect/rewrite_cookie), as one object per
 * protocol. The proxy module (src/http/modules/proxy/protocol.ts) is the
 * HTTP one; fastcgi, uwsgi, scgi and grpc plug in the same way.
 *
 * nginx's create_request is the protocol's own business here: the module
 * builds the request head (and picks the body sender) before it creates the
 * UpstreamRequest, which is where nginx calls it too (init_request). The
 * engine then sends that head and body on every try.
 */
import type { UpstreamDerived, UpstreamLoc } from './conf.ts';
import type { HeaderList } from './module.ts';
import type { UpstreamRequest } from './upstream-request.ts';

/** A response head as the protocol parsed it (nginx's u->headers_in and the status). */
export interface UpstreamHead {
  status: number;
  /** `200 OK` as received (sent on to the client). */
  statusLine: string;
  /** HTTP/0.9: no status line; the whole response is the body. */
  http09: boolean;
  headers: HeaderList;
  /** The body's framing, for the engine's body reader: a length (-1 when absent), chunked, or until close. */
  contentLength: number;
  chunked: boolean;
  /** The upstream closes after this response: HTTP/1.0 or `Connection: close` (no keepalive). */
  connectionClose: boolean;
  /** Offset of the body in the buffer that held the head. */
  bodyStart: number;
}

/** The body writer a cache gives the relay (every body byte, then end or abort). */
export interface BodyTee {
  push(b: Buffer): void;
  end(): void;
  abort(): void;
}

/**
 * A response cache in front of the upstream (proxy_cache today; nginx keeps
 * it in ngx_http_upstream_cache_*). Every hook may be called for requests of
 * locations without a cache and must then do nothing.
 */
export interface UpstreamCache<C extends UpstreamLoc, D extends UpstreamDerived> {
  /** Before the first try: true when the response was served (or the request finalized) from the cache. */
  lookup(u: UpstreamRequest<C, D>): boolean;
  /** The exchange failed with `rc` before a head went out: true when a stale response was sent instead. */
  serveStale(u: UpstreamRequest<C, D>, rc: number): boolean;
  /** The response's status is one the cache answers with a stale response instead: true when it did. */
  staleStatus(u: UpstreamRequest<C, D>, status: number, head: UpstreamHead): boolean;
  /** An intercepted error (`*_intercept_errors`) about to be finalized: remember it for the key. */
  error(u: UpstreamRequest<C, D>, head: UpstreamHead): void;
  /** The head was accepted: the writer that stores the body, when this response may be cached. `raw`: the head as received. */
  writer(u: UpstreamRequest<C, D>, head: UpstreamHead, raw: string): BodyTee | undefined;
}

/**
 * A protocol's own body framing (nginx's input_filter), for a protocol
 * whose body is not plain HTTP (FastCGI's records): decodes what is read
 * into body bytes.
 */
export interface UpstreamBodyDecoder {
  /**
   * Decodes `chunk`, pushing body bytes to `out`: AGAIN while the body goes
   * on, DONE at its end (then `keepalive` says whether the connection may be
   * reused), or an error message (logged; the response is cut short).
   */
  feed(chunk: Buffer, out: Buffer[]): typeof BODY_AGAIN | typeof BODY_DONE | string;
  readonly keepalive: boolean;
}

export const BODY_AGAIN = 0;
export const BODY_DONE = 1;

export interface UpstreamProtocol<C extends UpstreamLoc = UpstreamLoc, D extends UpstreamDerived = UpstreamDerived> {
  /**
   * nginx's process_header: the response head from `buf`, every byte read on
   * this try so far. Undefined while the head is incomplete, or when it is
   * invalid — then the protocol has logged it and called `u.invalidHeader()`.
   */
  processHeader(u: UpstreamRequest<C, D>, buf: Buffer): UpstreamHead | undefined;
  /**
   * Copies an accepted head into the client's response (nginx's
   * process_headers with the protocol's hidden fields, rewrite_redirect and
   * rewrite_cookie). Not called for X-Accel-Redirect or intercepted errors.
   */
  copyHeaders(u: UpstreamRequest<C, D>, head: UpstreamHead): void;
  /** The body's decoder for an accepted head, when the protocol frames the body itself (the head's framing fields are then unused). */
  bodyDecoder?(u: UpstreamRequest<C, D>, head: UpstreamHead): UpstreamBodyDecoder;
  /** nginx's reinit_request: before another try (the head and body are sent again as they are). */
  reinitRequest?(u: UpstreamRequest<C, D>): void;
  /** nginx's finalize_request: the exchange ended with `rc` (0 when the response went out). */
  finalizeRequest?(u: UpstreamRequest<C, D>, rc: number): void;
  cache?: UpstreamCache<C, D>;
}

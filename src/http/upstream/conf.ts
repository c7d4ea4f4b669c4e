/**
 * The upstream engine's per-location settings (nginx's
 * ngx_http_upstream_conf_t): what every protocol module that uses the engine
 * (proxy today; fastcgi, uwsgi, scgi, grpc later) embeds in its own location
 * configuration and fills from its `*_buffer_size`, `*_next_upstream`,
 * `*_read_timeout`... directives. The engine reads only these fields.
 */
import type { Complete } from '../../conf/context.ts';
import type { ComplexValue } from '../../core/variables.ts';
import type { UpstreamSslConf } from '../../tls/upstream-tls.ts';

/** *_next_upstream conditions (NGX_HTTP_UPSTREAM_FT_*). */
export const FT = {
  ERROR: 0x2,
  TIMEOUT: 0x4,
  INVALID_HEADER: 0x8,
  HTTP_500: 0x10,
  HTTP_502: 0x20,
  HTTP_503: 0x40,
  HTTP_504: 0x80,
  HTTP_403: 0x100,
  HTTP_404: 0x200,
  HTTP_429: 0x400,
  NOLIVE: 0x40000000,
  NON_IDEMPOTENT: 0x10000000,
  OFF: 0x80000000,
} as const;

/** *_ignore_headers bits (NGX_HTTP_UPSTREAM_IGN_*). */
export const IGN = {
  'X-Accel-Redirect': 0x2,
  'X-Accel-Expires': 0x4,
  'X-Accel-Limit-Rate': 0x8,
  'X-Accel-Buffering': 0x10,
  'X-Accel-Charset': 0x20,
  Expires: 0x40,
  'Cache-Control': 0x80,
  'Set-Cookie': 0x100,
  Vary: 0x200,
} as const;

/** A location's `*_ssl_*` settings (src/tls/upstream-tls.ts reads them). */
export type SslConf = UpstreamSslConf;

/** The fields the engine reads; a protocol's location configuration extends this. */
export interface UpstreamConf {
  ignoreHeaders?: number;
  interceptErrors?: boolean;
  /** nginx's intercept_404 (memcached): a 404 is always answered by nginx (error_page or its page), the upstream's body unread. */
  intercept404?: boolean;
  buffering?: boolean;
  requestBuffering?: boolean;
  bufferSize?: number;
  buffers?: { num: number; size: number };
  busyBuffersSize?: number;
  tempPath?: string;
  maxTempFileSize?: number;
  tempFileWriteSize?: number;
  connectTimeout?: number;
  readTimeout?: number;
  sendTimeout?: number;
  nextUpstream?: number;
  nextUpstreamTries?: number;
  nextUpstreamTimeout?: number;
  ignoreClientAbort?: boolean;
  passTrailers?: boolean;
  socketKeepalive?: boolean;
  bind?: ComplexValue | false;
  /** *_store: true for root + URI, a path with variables, false for off. */
  store?: boolean | ComplexValue;
  storeAccess?: number;
  /** *_limit_rate: bytes per second, or a value with variables evaluated per response. */
  limitRate?: number | ComplexValue;
  ssl?: SslConf;
}

/** nginx's defaults for the engine's fields (ngx_pagesize is 4096 here); a protocol's defaults include these. */
export const UPSTREAM_DEFAULTS = {
  ignoreHeaders: 0,
  interceptErrors: false,
  buffering: true,
  requestBuffering: true,
  bufferSize: 4096,
  buffers: { num: 8, size: 4096 },
  maxTempFileSize: 1024 * 1024 * 1024,
  connectTimeout: 60_000,
  readTimeout: 60_000,
  sendTimeout: 60_000,
  nextUpstream: FT.ERROR | FT.TIMEOUT,
  nextUpstreamTries: 0,
  nextUpstreamTimeout: 0,
  ignoreClientAbort: false,
  passTrailers: false,
  socketKeepalive: false,
} as const satisfies UpstreamConf;

/** What the engine reads: a location's merged configuration, every field with a default present. */
export type UpstreamLoc = Complete<UpstreamConf, typeof UPSTREAM_DEFAULTS>;

/** Values the engine needs computed once per location from the merged configuration. */
export interface UpstreamDerived {
  busyBuffersSize: number;
  tempFileWriteSize: number;
  tempPath: string;
}

/**
 * ngx_http_proxy_module's per-location configuration: the fields directives
 * set, how a location inherits them (nginx's merge_loc_conf), and the values
 * derived once per location after merging (buffer sizes, the header plan,
 * the hidden header set, the default proxy_redirect).
 */
import { defineSlot } from '../../../conf/context.ts';
import type { MergedConf } from '../../../conf/context.ts';
import type { ComplexValue } from '../../variables.ts';
import type { CertCacheConf } from './cert-cache.ts';
import type { HeaderPlan } from './request-head.ts';
import type { CookieFlagRule } from './cookies.ts';
import type { RedirectRule } from './redirect.ts';
import type { ProxyTarget } from './target.ts';

/** proxy_next_upstream conditions (NGX_HTTP_UPSTREAM_FT_*). */
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

/** proxy_ignore_headers bits (NGX_HTTP_UPSTREAM_IGN_*). */
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

export interface SslConf {
  serverName?: boolean;
  name?: ComplexValue;
  verify?: boolean;
  verifyDepth?: number;
  trustedCertificate?: string;
  certificate?: ComplexValue;
  certificateKey?: ComplexValue;
  passwordFile?: string;
  sessionReuse?: boolean;
  protocols?: string[];
  ciphers?: string;
  crl?: string;
  /** proxy_ssl_certificate_cache (false: off). */
  certificateCache?: CertCacheConf | false;
  /** Where relative certificate paths (possibly built from variables) are resolved. */
  confPrefix?: string;
}

export interface ProxyLocConf {
  target?: ProxyTarget;
  /** Set when this level has its own proxy_pass (for proxy_redirect default). */
  ownTarget?: boolean;
  /** proxy_set_header lines of the level that defines them (a level with any inherits none). */
  setHeaders?: { name: string; value: ComplexValue }[];
  setBody?: ComplexValue;
  method?: ComplexValue;
  httpVersion?: '1.0' | '1.1';
  passRequestHeaders?: boolean;
  passRequestBody?: boolean;
  /** `off`, or the rules (a level with rules inherits none). */
  redirect?: false | RedirectRule[];
  hideHeaders?: string[];
  passHeaders?: string[];
  ignoreHeaders?: number;
  interceptErrors?: boolean;
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
  /** proxy_store: true for root + URI, a path with variables, false for off. */
  store?: boolean | ComplexValue;
  storeAccess?: number;
  /** proxy_limit_rate: bytes per second, or a value with variables evaluated per response. */
  limitRate?: number | ComplexValue;
  /** proxy_cookie_domain / proxy_cookie_path rules, proxy_cookie_flags (`off`: false). */
  cookieDomains?: false | RedirectRule[];
  cookiePaths?: false | RedirectRule[];
  cookieFlags?: false | CookieFlagRule[];
  /** `proxy_temp` under the prefix, recorded by proxy_pass (the default proxy_temp_path). */
  defaultTempPath?: string;
  ssl?: SslConf;

  /** Derived once per location by finishConf. */
  derived?: DerivedConf;
}

/** Values computed from the merged configuration of one location. */
export interface DerivedConf {
  busyBuffersSize: number;
  tempFileWriteSize: number;
  tempPath: string;
  headerPlan: HeaderPlan;
  /** Lowercased upstream header names not passed to the client. */
  hidden: Set<string>;
  redirects: RedirectRule[] | undefined;
  /** The location's configuration when it rewrites Set-Cookie fields, else undefined. */
  cookies: ProxyLocConf | undefined;
}

/** nginx's defaults (ngx_pagesize is 4096 here). */
export const PROXY_DEFAULTS = {
  httpVersion: '1.0',
  passRequestHeaders: true,
  passRequestBody: true,
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
} as const satisfies ProxyLocConf;

const SSL_FIELDS = ['serverName', 'name', 'verify', 'verifyDepth', 'trustedCertificate', 'certificate',
  'certificateKey', 'passwordFile', 'sessionReuse', 'protocols', 'ciphers', 'crl', 'certificateCache', 'confPrefix'] as const;

function mergeProxy(parent: ProxyLocConf, child: ProxyLocConf): void {
  const c = child as Record<string, unknown>;
  const p = parent as Record<string, unknown>;
  for (const k of Object.keys(p)) {
    // proxy_redirect is resolved per location by finishConf (it inherits the parent's resolved rules)
    if (k === 'derived' || k === 'ownTarget' || k === 'ssl' || k === 'redirect') continue;
    if (c[k] === undefined) c[k] = p[k];
  }
  if (parent.ssl) {
    const cs = (child.ssl ??= {}) as Record<string, unknown>;
    const ps = parent.ssl as Record<string, unknown>;
    for (const k of SSL_FIELDS) if (cs[k] === undefined) cs[k] = ps[k];
  }
}

export const proxyLoc = defineSlot<ProxyLocConf, typeof PROXY_DEFAULTS>('proxy_loc', () => ({}), mergeProxy, PROXY_DEFAULTS);

/** A location's merged configuration, as run time reads it (every field with a default present). */
export type ProxyLoc = MergedConf<typeof proxyLoc>;

/**
 * ngx_http_proxy_module's per-location configuration: the fields directives
 * set, how a location inherits them (nginx's merge_loc_conf), and the values
 * derived once per location after merging (buffer sizes, the header plan,
 * the hidden header set, the default proxy_redirect).
 */
import { defineSlot } from '../../../conf/context.ts';
import type { ComplexValue } from '../../../core/variables.ts';
import { UPSTREAM_DEFAULTS } from '../../upstream/conf.ts';
import type { UpstreamDerived } from '../../upstream/conf.ts';
import type { UpstreamModuleConf } from '../../upstream/directives.ts';
import { mergeSsl } from '../../upstream/directives.ts';
import type { MergedConf } from '../../../conf/context.ts';
import type { CertCacheConf } from '../../../tls/upstream-cert-cache.ts';
import type { UpstreamRequest } from '../../upstream/upstream-request.ts';
import type { HeaderPlan } from './request-head.ts';
import type { RedirectRule } from './redirect.ts';
import type { ProxyTarget } from './target.ts';

/** A `proxy_cookie_flags` rule: the cookie (a name or a regex) and the flags to set or clear. */
export interface CookieFlagRule {
  cookie: ComplexValue | undefined;
  regex: RegExp | undefined;
  flags: ComplexValue[];
}

export interface ProxyLocConf extends UpstreamModuleConf {
  target?: ProxyTarget;
  /** Set when this level has its own proxy_pass (for proxy_redirect default). */
  ownTarget?: boolean;
  /** proxy_set_header lines of the level that defines them (a level with any inherits none). */
  setHeaders?: { name: string; value: ComplexValue }[];
  setBody?: ComplexValue;
  method?: ComplexValue;
  httpVersion?: '1.0' | '1.1';
  /** `off`, or the rules (a level with rules inherits none). */
  redirect?: false | RedirectRule[];
  /** proxy_cookie_domain / proxy_cookie_path rules, proxy_cookie_flags (`off`: false). */
  cookieDomains?: false | RedirectRule[];
  cookiePaths?: false | RedirectRule[];
  cookieFlags?: false | CookieFlagRule[];
  /** `proxy_temp` under the prefix, recorded by proxy_pass (the default proxy_temp_path). */
  defaultTempPath?: string;

  /** Derived once per location by finishConf. */
  derived?: DerivedConf;
}

/** Values computed from the merged configuration of one location. */
export interface DerivedConf extends UpstreamDerived {
  headerPlan: HeaderPlan;
  /** Lowercased upstream header names not passed to the client. */
  hidden: Set<string>;
  redirects: RedirectRule[] | undefined;
  /** The location's configuration when it rewrites Set-Cookie fields, else undefined. */
  cookies: ProxyLocConf | undefined;
}

/** nginx's defaults (ngx_pagesize is 4096 here). */
export const PROXY_DEFAULTS = {
  ...UPSTREAM_DEFAULTS,
  httpVersion: '1.0',
  passRequestHeaders: true,
  passRequestBody: true,
} as const satisfies ProxyLocConf;

function mergeProxy(parent: ProxyLocConf, child: ProxyLocConf): void {
  const c = child as Record<string, unknown>;
  const p = parent as Record<string, unknown>;
  for (const k of Object.keys(p)) {
    // proxy_redirect is resolved per location by finishConf (it inherits the parent's resolved rules)
    if (k === 'derived' || k === 'ownTarget' || k === 'ssl' || k === 'redirect') continue;
    if (c[k] === undefined) c[k] = p[k];
  }
  mergeSsl(parent, child);
}

export const proxyLoc = defineSlot<ProxyLocConf, typeof PROXY_DEFAULTS>('proxy_loc', () => ({}), mergeProxy, PROXY_DEFAULTS);

/** A location's merged configuration, as run time reads it (every field with a default present). */
export type ProxyLoc = MergedConf<typeof proxyLoc>;

/** One proxied request's exchange with the engine. */
export type ProxyUpstream = UpstreamRequest<ProxyLoc, DerivedConf>;

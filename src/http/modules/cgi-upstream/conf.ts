/**
 * What the CGI-family modules (fastcgi, uwsgi, scgi) share on the upstream
 * engine: the location configuration (`*_pass`, `*_param`, the engine's
 * settings), its merge and defaults, and the values derived once per
 * location (buffer figures, hidden headers, the request headers a param
 * already carries).
 */
import type { ConfSlot, Complete } from '../../../conf/context.ts';
import type { ComplexValue } from '../../../core/variables.ts';
import type { UpstreamGroup } from '../../../upstream/group.ts';
import { UPSTREAM_DEFAULTS } from '../../upstream/conf.ts';
import type { UpstreamDerived } from '../../upstream/conf.ts';
import type { UpstreamModuleConf } from '../../upstream/directives.ts';
import { mergeSsl } from '../../upstream/directives.ts';
import type { UpstreamRequest } from '../../upstream/upstream-request.ts';

/** One `*_param NAME value [if_not_empty]` line. */
export interface CgiParam {
  name: string;
  value: ComplexValue;
  ifNotEmpty: boolean;
}

/** `*_pass`'s argument: a group made at configuration time, or a value with variables. */
export interface CgiTarget {
  group: UpstreamGroup | undefined;
  dynamic: ComplexValue | undefined;
  /** Over TLS (`suwsgi://`), with this name for SNI and verification. */
  tls: boolean;
  host: string;
}

export interface CgiLocConf extends UpstreamModuleConf {
  target?: CgiTarget;
  /** This level has its own `*_pass` (the target may be inherited later). */
  ownTarget?: boolean;
  /** The level's own params; a level with any inherits none. */
  params?: CgiParam[];
  /** `<module>_temp` under the prefix, recorded by `*_pass` (the default temp path). */
  defaultTempPath?: string;
  derived?: CgiDerived;
}

export interface CgiDerived extends UpstreamDerived {
  /** Lowercased upstream header names not passed to the client. */
  hidden: Set<string>;
  /** `HTTP_*` names a param sets: the request headers of those names are not passed again. */
  headerParams: Set<string>;
  /** Server and Date are not hidden: nginx's own stay unless the upstream sends its own. */
  passesServerDate: true;
}

/** nginx's defaults of the three modules. */
export const CGI_DEFAULTS = {
  ...UPSTREAM_DEFAULTS,
  passRequestHeaders: true,
  passRequestBody: true,
} as const satisfies CgiLocConf;

/** Upstream header fields these modules never pass to the client (ngx_http_fastcgi_hide_headers and its twins). */
export const CGI_HIDDEN = ['status', 'x-accel-expires', 'x-accel-redirect', 'x-accel-limit-rate', 'x-accel-buffering', 'x-accel-charset'];

/** The usual merge, less what belongs to one level (its own `*_pass` mark, the derived values). */
export function mergeCgi<C extends CgiLocConf>(parent: C, child: C): void {
  const c = child as Record<string, unknown>;
  const p = parent as Record<string, unknown>;
  for (const k of Object.keys(p)) {
    if (k === 'derived' || k === 'ownTarget' || k === 'ssl') continue;
    if (c[k] === undefined) c[k] = p[k];
  }
  mergeSsl(parent, child);
}

/** A module's merged location configuration. */
export type CgiLoc<C extends CgiLocConf = CgiLocConf> = Complete<C, typeof CGI_DEFAULTS>;

/** The slot type of a CGI-family module. */
export type CgiSlot<C extends CgiLocConf> = ConfSlot<C, CgiLoc<C>>;

/** One request's exchange with a CGI-family upstream. */
export type CgiUpstream<C extends CgiLocConf = CgiLocConf> = UpstreamRequest<CgiLoc<C>, CgiDerived>;

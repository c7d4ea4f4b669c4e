/**
 * proxy_pass targets: parsing the URL once (or per request when it has
 * variables), `$proxy_host`/`$proxy_port`, and the URI sent upstream with
 * nginx's replacement rules (ngx_http_proxy_create_request):
 * - no URI part: the client's request URI as received, or the current
 *   (rewritten, re-escaped) URI after a rewrite or internal redirect;
 * - a URI part: it replaces the part of the URI that matched the location;
 * - after `rewrite ... break`: the rewritten URI as is;
 * - variables: the evaluated URI is sent as is.
 */
import type { ConfContext } from '../../../conf/context.ts';
import { parseUrl } from '../../../upstream/address.ts';
import type { UpstreamGroup } from '../../../upstream/group.ts';
import type { HttpRequest } from '../../request.ts';
import type { ComplexValue } from '../../../core/variables.ts';
import { upstreamAdd } from '../../upstream/module.ts';

export interface ProxyTarget {
  /** The proxy_pass argument as written. */
  url: string;
  /** `http://` or `https://`, as written. */
  schema: string;
  https: boolean;
  /** The group of a static target. */
  group: UpstreamGroup | undefined;
  /** The compiled URL of a target with variables. */
  dynamic: ComplexValue | undefined;
  /** `$proxy_host`: host[:port] as written, `localhost` for unix sockets. */
  hostHeader: string;
  /** `$proxy_port`. */
  port: string;
  /** The URI part ('' when none). */
  uri: string;
  /** The location prefix the URI part replaces ('' in regex, named and noname locations). */
  location: string;
  /** Host to use for SNI/proxy_ssl_name (no port). */
  host: string;
}

/** The target evaluated for one request (static targets are their own resolved form). */
export interface ResolvedTarget {
  schema: string;
  https: boolean;
  hostHeader: string;
  port: string;
  uri: string;
  host: string;
  /** For dynamic targets: where to connect. */
  group?: UpstreamGroup;
  /** Host to resolve, or an IP/unix address ready to use. */
  connectHost?: string;
  connectPort?: number;
  /** The URL named no port (then it may name an `upstream {}` block). */
  noPort?: boolean;
  unix?: boolean;
}

function hostVars(hostPort: string, host: string, port: number | undefined, unix: boolean, https: boolean): { hostHeader: string; port: string } {
  if (unix) return { hostHeader: 'localhost', port: '' };
  const def = https ? 443 : 80;
  if (port === undefined || port === def) {
    // nginx keeps the host as written (with IPv6 brackets) and drops a default port
    const h = hostPort.startsWith('[') ? hostPort.slice(0, hostPort.indexOf(']') + 1) : host;
    return { hostHeader: h, port: String(def) };
  }
  return { hostHeader: hostPort, port: String(port) };
}

function splitSchema(url: string): { schema: string; https: boolean; rest: string } | undefined {
  const lower = url.slice(0, 8).toLowerCase();
  if (lower.startsWith('http://')) return { schema: url.slice(0, 7), https: false, rest: url.slice(7) };
  if (lower.startsWith('https://')) return { schema: url.slice(0, 8), https: true, rest: url.slice(8) };
  return undefined;
}

/** Parses a static proxy_pass URL at configuration time; registers its upstream group. */
export function staticTarget(cf: ConfContext, url: string, location: string): ProxyTarget {
  const s = splitSchema(url);
  if (!s) throw cf.error('invalid URL prefix');
  const u = parseUrl(s.rest, { uriPart: true });
  if (typeof u === 'string') throw cf.error(`${u} in upstream "${s.rest}"`);
  const group = upstreamAdd(cf, u, false);
  const hv = hostVars(u.hostPort, u.host, u.port, u.unix, s.https);
  return {
    url, schema: s.schema, https: s.https, group, dynamic: undefined,
    hostHeader: hv.hostHeader, port: hv.port, uri: u.uri, location, host: u.unix ? 'localhost' : u.host,
  };
}

/** A target with variables: evaluated per request. */
export function dynamicTarget(url: string, value: ComplexValue): ProxyTarget {
  const s = splitSchema(url);
  return {
    url, schema: s?.schema ?? 'http://', https: s?.https ?? false, group: undefined, dynamic: value,
    hostHeader: '', port: '', uri: '', location: '', host: '',
  };
}

/** Evaluates a dynamic target (ngx_http_proxy_eval); an error text for the log on failure. */
export function evalTarget(t: ProxyTarget, r: HttpRequest): ResolvedTarget | string {
  const url = t.dynamic!.evaluate(r);
  const s = url.length > 7 ? splitSchema(url) : undefined;
  if (!s || s.rest === '') return `invalid URL prefix in "${url}"`;
  const u = parseUrl(s.rest, { uriPart: true });
  if (typeof u === 'string') return `${u} in upstream "${s.rest}"`;
  let uri = u.uri;
  if (uri.startsWith('?')) uri = '/' + uri;
  const hv = hostVars(u.hostPort, u.host, u.port, u.unix, s.https);
  return {
    schema: s.schema, https: s.https, hostHeader: hv.hostHeader, port: hv.port, uri, host: u.unix ? 'localhost' : u.host,
    connectHost: u.host, connectPort: u.unix ? undefined : (u.port ?? (s.https ? 443 : 80)), noPort: u.port === undefined, unix: u.unix,
  };
}

/** Characters ngx_escape_uri(NGX_ESCAPE_URI) escapes: controls, space, `#`, `%`, `?`, and bytes ≥ 0x7f. */
function needsEscape(c: number): boolean {
  return c <= 0x20 || c === 0x23 || c === 0x25 || c === 0x3f || c >= 0x7f;
}

const HEX = '0123456789ABCDEF';

export function escapeUriPart(s: string): string {
  let i = 0;
  while (i < s.length && !needsEscape(s.charCodeAt(i))) i++;
  if (i === s.length) return s;
  let out = s.slice(0, i);
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    out += needsEscape(c) ? '%' + HEX[c >> 4] + HEX[c & 15] : s[i];
  }
  return out;
}

/** Whether the request path had %-escapes (nginx's r->quoted_uri). */
function quotedUri(r: HttpRequest): boolean {
  const u = r.requestUri;
  const p = u.indexOf('%');
  if (p < 0) return false;
  const q = u.indexOf('?');
  return q < 0 || p < q;
}

/**
 * The URI to send upstream. `validLocation` is false after `rewrite ... break`
 * (nginx's r->valid_location); the unparsed URI is valid while the request was
 * neither rewritten nor redirected.
 */
export function upstreamUri(r: HttpRequest, targetUri: string, location: string, dynamic: boolean): string {
  if (dynamic && targetUri) return targetUri;
  // `http://host?args` has no path to pass as it came: nginx sends the parsed one (`/?args`)
  if (!targetUri && !r.internal && !r.head.emptyPath) return r.requestUri;
  const validLocation = (r as { validLocation?: boolean }).validLocation !== false;
  const locLen = validLocation && targetUri ? Math.min(location.length, r.uri.length) : 0;
  let rest = r.uri.slice(locLen);
  if (r.internal || quotedUri(r)) rest = escapeUriPart(rest);
  let uri = validLocation ? targetUri + rest : rest;
  if (r.args) uri += '?' + r.args;
  return uri;
}

/**
 * APISIX's stream router (apisix/stream/router/ip_port.lua) over one
 * configuration version: routes with an `sni` are tried first for a
 * session whose ClientHello named one — the exact name, then `*.` suffixes
 * longest first (any depth: no certificate is at stake) — each with its
 * address conditions; then the routes without `sni`, in creation order, by
 * `remote_addr` and `server_addr` (an address or a CIDR) and
 * `server_port`. A route's upstream is its own `upstream`, its
 * `upstream_id`, or its service's.
 */
import { cidrMatch, clientAddrOf, parseCidr } from '../../core/inet.ts';
import type { Cidr } from '../../core/inet.ts';
import type { ConfigView, StreamRouteConf, UpstreamConf } from './config-view.ts';

export interface StreamFacts {
  serverAddr: string;
  serverPort: number;
  remoteAddr: string;
  /** The ClientHello's server name, lowercase; undefined when none was read. */
  sni: string | undefined;
}

export interface MatchedStreamRoute {
  conf: StreamRouteConf;
  /** Undefined: the route's upstream_id or service is missing (`missing` says which), or it has none. */
  upstream: UpstreamConf | undefined;
  missing: 'service' | 'upstream_id' | undefined;
  /** The balancer state's key (as the HTTP routes'). */
  upstreamKey: string;
}

interface Entry {
  route: MatchedStreamRoute;
  remote: Cidr[] | undefined;
  server: Cidr[] | undefined;
  port: number | undefined;
}

interface StreamIndex {
  exact: Map<string, Entry[]>;
  /** `*.x.com` as `.x.com`, longest first. */
  wildcard: Array<[string, Entry[]]>;
  other: Entry[];
}

const indexes = new WeakMap<ConfigView, StreamIndex>();

function cidrs(text: string | undefined): Cidr[] | undefined {
  if (text === undefined) return undefined;
  const c = parseCidr(text);
  // an address the Admin API let through but that does not parse matches nothing
  return c ? [c] : [];
}

/** apisix/init.lua stream_preread_phase: upstream_id first, then the route's upstream over its service's. */
function upstreamOf(conf: StreamRouteConf, view: ConfigView): Pick<MatchedStreamRoute, 'upstream' | 'upstreamKey' | 'missing'> {
  const byId = (id: string | number) => {
    const upstream = view.upstreams.get(String(id));
    return { upstream, upstreamKey: `upstream/${id}`, missing: upstream ? undefined : 'upstream_id' as const };
  };
  if (conf.upstream_id !== undefined) return byId(conf.upstream_id);
  if (conf.service_id !== undefined) {
    const svc = view.services.get(String(conf.service_id));
    if (!svc) return { upstream: undefined, upstreamKey: '', missing: 'service' };
    if (!conf.upstream && svc.upstream_id !== undefined) return byId(svc.upstream_id);
    if (!conf.upstream) return { upstream: svc.upstream, upstreamKey: `service/${svc.id}`, missing: undefined };
  }
  return { upstream: conf.upstream, upstreamKey: `stream_route/${conf.id}`, missing: undefined };
}

function indexOf(view: ConfigView): StreamIndex {
  let idx = indexes.get(view);
  if (idx) return idx;
  idx = { exact: new Map(), wildcard: [], other: [] };
  const wild = new Map<string, Entry[]>();
  for (const conf of view.streamRoutes) {
    // a subordinate route (xRPC) is not matched at the entry
    if (conf.protocol?.superior_id !== undefined) continue;
    const e: Entry = {
      route: { conf, ...upstreamOf(conf, view) },
      remote: cidrs(conf.remote_addr), server: cidrs(conf.server_addr), port: conf.server_port,
    };
    if (conf.sni === undefined) { idx.other.push(e); continue; }
    const name = conf.sni.replace(/\.$/, '').toLowerCase();
    const [m, k] = name.startsWith('*.') ? [wild, name.slice(1)] : [idx.exact, name];
    const list = m.get(k);
    if (list) list.push(e);
    else m.set(k, [e]);
  }
  idx.wildcard = [...wild].sort((a, b) => b[0].length - a[0].length);
  indexes.set(view, idx);
  return idx;
}

function holds(e: Entry, f: StreamFacts): boolean {
  if (e.remote && !cidrMatch(clientAddrOf(f.remoteAddr, 0), e.remote)) return false;
  if (e.server && !cidrMatch(clientAddrOf(f.serverAddr, 0), e.server)) return false;
  return e.port === undefined || e.port === f.serverPort;
}

/** Whether some route needs the session's SNI (the ClientHello is read only then). */
export function wantsSni(view: ConfigView): boolean {
  const idx = indexOf(view);
  return idx.exact.size > 0 || idx.wildcard.length > 0;
}

export function matchStreamRoute(view: ConfigView, f: StreamFacts): MatchedStreamRoute | undefined {
  const idx = indexOf(view);
  if (f.sni) {
    for (const e of idx.exact.get(f.sni) ?? []) if (holds(e, f)) return e.route;
    for (const [suffix, list] of idx.wildcard) {
      if (!f.sni.endsWith(suffix) || f.sni.length === suffix.length) continue;
      for (const e of list) if (holds(e, f)) return e.route;
    }
  }
  for (const e of idx.other) if (holds(e, f)) return e.route;
  return undefined;
}

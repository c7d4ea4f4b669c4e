/**
 * APISIX's HTTP router over one configuration version: `radixtree_host_uri`
 * (the default: routes grouped by host — exact hosts, then `*.` wildcards
 * longest first — and routes without hosts only when no host group has a
 * match) or `radixtree_uri` (paths first, hosts one condition among the
 * others). A route is merged with its service and plugin config when the
 * router is built (apisix/http/route.lua, apisix/plugin.lua): service
 * hosts when the route has none, the route's upstream before the
 * service's, plugins with precedence route > plugin_config > service.
 * `status: 0` routes are left out.
 */
import { cidrMatch, clientAddrOf, parseCidr } from '../../core/inet.ts';
import type { Cidr } from '../../core/inet.ts';
import type { ConfigView, Plugins, RouteConf, UpstreamConf } from './config-view.ts';
import { compileVars } from './expr.ts';
import type { Expr, VarReader } from './expr.ts';
import { UriRouter } from './uri-router.ts';
import { luaNow } from '../plugins/serverless.ts';
import type { PathEntry } from './uri-router.ts';

/** What a matched route brings to the request. */
export interface MatchedRoute {
  id: string;
  conf: RouteConf;
  /** Route, plugin config and service plugins merged. */
  plugins: Plugins;
  /** The upstream to use; `missing` says why there is none. */
  upstream: UpstreamConf | undefined;
  missing: 'service' | 'upstream_id' | 'none' | undefined;
  /** The cache key of the upstream's balancer state (changes with the upstream's version). */
  upstreamKey: string;
  enableWebsocket: boolean;
}

export interface RequestFacts {
  path: string;
  method: string;
  /** `$host`: lowercased, without port. */
  host: string;
  /** The Host header as sent (patterns with a port compare to it). */
  rawHost: string;
  remoteAddr: string;
  read: VarReader;
  /** The request itself, for the error log of a filter_func that raises. */
  request?: object;
}

/** What matched a request: the route, and the uri and host patterns that selected it (radixtree's `_path` and `_host`). */
export interface RouteMatch {
  route: MatchedRoute;
  /** The uri pattern as written (`/foo/*`). */
  written: string;
  /** The host pattern as written, `''` when the route was found without one. */
  host: string;
}

interface Entry extends PathEntry, RouteMatch {
  hosts: string[] | undefined;
  methods: Set<string> | undefined;
  remote: Cidr[] | undefined;
  vars: Expr | undefined;
  filter: string | undefined;
}

function hostMatches(pattern: string, f: RequestFacts): boolean {
  if (pattern === '*') return true;
  if (pattern.includes(':')) return pattern.toLowerCase() === f.rawHost.toLowerCase();
  if (pattern.startsWith('*')) return f.host.endsWith(pattern.slice(1).toLowerCase());
  return pattern.toLowerCase() === f.host;
}

function conditionsHold(e: Entry, f: RequestFacts, checkHosts: boolean): boolean {
  if (e.methods && !e.methods.has(f.method)) return false;
  if (checkHosts && e.hosts && !e.hosts.some((h) => hostMatches(h, f))) return false;
  if (e.remote && !cidrMatch(clientAddrOf(f.remoteAddr, 0), e.remote)) return false;
  if (e.vars && !e.vars(f.read)) return false;
  // filter_func(vars) (apisix/http/route.lua): the access phase makes the worker's Lua before it routes with one
  if (e.filter !== undefined && !(luaNow()?.filter(e.filter, f.read, f.request) ?? false)) return false;
  return true;
}

/** The route with its service and plugin config folded in. */
function mergeRoute(conf: RouteConf, view: ConfigView): { route: MatchedRoute; hosts: string[] | undefined } {
  let plugins: Plugins = {};
  let upstream: UpstreamConf | undefined;
  let upstreamKey = '';
  let missing: MatchedRoute['missing'];
  let hosts = conf.hosts ?? (conf.host !== undefined ? [conf.host] : undefined);
  let websocket = conf.enable_websocket;
  if (conf.service_id !== undefined) {
    const svc = view.services.get(String(conf.service_id));
    if (!svc) missing = 'service';
    else {
      plugins = { ...svc.plugins };
      hosts ??= svc.hosts;
      websocket ??= svc.enable_websocket;
      if (svc.upstream) { upstream = svc.upstream; upstreamKey = `service/${svc.id}`; }
      else if (svc.upstream_id !== undefined) { upstream = view.upstreams.get(String(svc.upstream_id)); upstreamKey = `upstream/${svc.upstream_id}`; if (!upstream) missing = 'upstream_id'; }
    }
  }
  if (conf.plugin_config_id !== undefined) Object.assign(plugins, view.pluginConfigs.get(String(conf.plugin_config_id))?.plugins);
  Object.assign(plugins, conf.plugins);
  if (conf.upstream) { upstream = conf.upstream; upstreamKey = `route/${conf.id}`; if (missing === 'upstream_id') missing = undefined; }
  else if (conf.upstream_id !== undefined) {
    upstream = view.upstreams.get(String(conf.upstream_id));
    upstreamKey = `upstream/${conf.upstream_id}`;
    missing = upstream ? (missing === 'service' ? 'service' : undefined) : 'upstream_id';
  }
  if (!upstream && !missing) missing = 'none';
  const route: MatchedRoute = { id: conf.id, conf, plugins, upstream, missing, upstreamKey, enableWebsocket: websocket === true };
  return { route, hosts };
}

/** A route's merged and compiled form, kept while the route and what it refers to are the same objects. */
interface CompiledRoute {
  deps: unknown[];
  route: MatchedRoute;
  hosts: string[] | undefined;
  methods: Set<string> | undefined;
  remote: Cidr[] | undefined;
  vars: Expr | undefined;
  filter: string | undefined;
}

const compiledRoutes = new WeakMap<RouteConf, CompiledRoute>();

/** The objects a route's merged form depends on (the configuration view keeps unchanged ones identical). */
function depsOf(conf: RouteConf, view: ConfigView): unknown[] {
  const svc = conf.service_id !== undefined ? view.services.get(String(conf.service_id)) : undefined;
  return [
    svc,
    svc?.upstream_id !== undefined ? view.upstreams.get(String(svc.upstream_id)) : undefined,
    conf.plugin_config_id !== undefined ? view.pluginConfigs.get(String(conf.plugin_config_id)) : undefined,
    conf.upstream_id !== undefined ? view.upstreams.get(String(conf.upstream_id)) : undefined,
  ];
}

/** Rebuilding after one change compiles again only the routes that change touched. */
function compileRoute(conf: RouteConf, view: ConfigView): CompiledRoute {
  const deps = depsOf(conf, view);
  const had = compiledRoutes.get(conf);
  if (had && had.deps.every((d, i) => d === deps[i])) return had;
  const { route, hosts } = mergeRoute(conf, view);
  const remote = conf.remote_addrs ?? (conf.remote_addr !== undefined ? [conf.remote_addr] : undefined);
  const c: CompiledRoute = {
    deps, route, hosts,
    methods: conf.methods && conf.methods.length ? new Set(conf.methods) : undefined,
    remote: remote?.map((a) => parseCidr(a)).filter((x): x is Cidr => x !== undefined),
    vars: compileVars(conf.vars),
    filter: typeof conf.filter_func === 'string' ? conf.filter_func : undefined,
  };
  compiledRoutes.set(conf, c);
  return c;
}

export class HttpRouter {
  readonly revision: number;
  /** Some route has a filter_func: the worker's Lua must be made before routing. */
  readonly needsLua: boolean;
  private readonly byHost = new Map<string, UriRouter<Entry>>();
  /** Wildcard host groups (`*.foo.com` as `.foo.com`), longest suffix first. */
  private readonly wildcards: Array<[string, UriRouter<Entry>]> = [];
  private readonly anyHost = new UriRouter<Entry>();
  private readonly hostFirst: boolean;

  constructor(view: ConfigView, mode: 'radixtree_host_uri' | 'radixtree_uri') {
    this.revision = view.revision;
    this.needsLua = view.routes.some((c) => c.status !== 0 && typeof c.filter_func === 'string');
    this.hostFirst = mode === 'radixtree_host_uri';
    const wild = new Map<string, UriRouter<Entry>>();
    let order = 0;
    for (const conf of view.routes) {
      if (conf.status === 0) continue;
      let c: CompiledRoute;
      try {
        c = compileRoute(conf, view);
      } catch {
        continue; // a `vars` regex JavaScript cannot compile: the route is left out, as APISIX skips an item it cannot load
      }
      const hosts = c.hosts;
      const base = { route: c.route, hosts, methods: c.methods, remote: c.remote, vars: c.vars, filter: c.filter, priority: conf.priority ?? 0, order: order++ };
      // each group with the host pattern that leads to it
      const groups: Array<[UriRouter<Entry>, string]> = [];
      if (!this.hostFirst || !hosts || hosts.includes('*')) groups.push([this.anyHost, '']);
      else {
        for (const h of hosts) {
          const lower = h.toLowerCase();
          const wildcard = lower.startsWith('*');
          const map = wildcard ? wild : this.byHost;
          const key = wildcard ? lower.slice(1) : lower;
          let g = map.get(key);
          if (!g) map.set(key, (g = new UriRouter<Entry>()));
          if (!groups.some(([x]) => x === g)) groups.push([g, h]);
        }
      }
      for (const path of conf.uris ?? (conf.uri !== undefined ? [conf.uri] : [])) {
        for (const [g, host] of groups) g.add(path, { ...base, written: path, host });
      }
    }
    this.wildcards = [...wild.entries()].sort((a, b) => b[0].length - a[0].length);
  }

  /** The route for a request (an entry made when the router was built: nothing is allocated per request). */
  match(f: RequestFacts): RouteMatch | undefined {
    if (!this.hostFirst) return this.anyHost.match(f.path, (e) => conditionsHold(e, f, true));
    const accept = (e: Entry): boolean => conditionsHold(e, f, false);
    const exact = this.byHost.get(f.host);
    const hit = exact?.match(f.path, accept);
    if (hit) return hit;
    // a host pattern with a port is the Host header as sent
    const withPort = f.rawHost.includes(':') ? this.byHost.get(f.rawHost.toLowerCase())?.match(f.path, accept) : undefined;
    if (withPort) return withPort;
    for (const [suffix, g] of this.wildcards) {
      if (!f.host.endsWith(suffix)) continue;
      const w = g.match(f.path, accept);
      if (w) return w;
    }
    return this.anyHost.match(f.path, (e) => conditionsHold(e, f, true));
  }
}

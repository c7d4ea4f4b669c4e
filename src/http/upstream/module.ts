/**
 * ngx_http_upstream_module (with ngx_http_upstream_keepalive_module):
 * `upstream {}` groups and their `server` lines, upstream keepalive, the
 * groups proxy_pass creates implicitly, and the `$upstream_*` variables,
 * which read the per-request record of upstream tries the proxy fills in.
 */
import net from 'node:net';
import { defineSlot, Level } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import { msecArg, parseTime } from '../../conf/values.ts';
import { setting, unique } from '../../conf/setters.ts';
import { parseServerParams } from '../../upstream/server-params.ts';
import { sharedZone } from '../../core/shared.ts';
import { parseUrl, resolveAddresses } from '../../upstream/address.ts';
import type { ParsedUrl } from '../../upstream/address.ts';
import type { Balancer } from '../../upstream/balancers.ts';
import { readBalancer, readZone } from '../../upstream/block-directives.ts';
import { UpstreamGroup } from '../../upstream/group.ts';
import { ANSWER_MEMORY, watchResolvedServers } from '../../upstream/resolve-servers.ts';
import { parseResolverArgs, resolverForArgs } from '../../upstream/resolver.ts';
import { KeepalivePool } from '../../upstream/keepalive.ts';
import { httpConf, httpMainOf } from '../http-conf.ts';
import type { HttpMainConf, HttpModule, HttpVariable } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue, VariableDef, VarValue } from '../../core/variables.ts';
import { CORE_LOC_DEFAULTS, coreLoc } from '../core/settings.ts';

/** Every upstream group of an `http {}` block, explicit and implicit (nginx's umcf->upstreams). */
export const upstreamMainSlot = defineSlot<{ groups: UpstreamGroup[] }>('upstream_main', () => ({ groups: [] }));

/** Looks up or creates a group the way ngx_http_upstream_add does. */
export function upstreamAdd(cf: ConfContext, u: ParsedUrl, explicit: boolean): UpstreamGroup {
  const main = cf.at('http', upstreamMainSlot);
  const file = cf.node?.file ?? '';
  const line = cf.node?.line ?? 0;
  const host = u.host.toLowerCase();
  for (let i = 0; i < main.groups.length; i++) {
    const g = main.groups[i];
    if (g.name.toLowerCase() !== host) continue;
    if (explicit && g.explicit) throw cf.error(`duplicate upstream "${u.host}"`);
    if (g.explicit && u.port !== undefined) throw cf.error(`upstream "${u.host}" may not have port ${u.port}`);
    if (explicit && g.port !== undefined) {
      throw new ConfError(`upstream "${u.host}" may not have port ${g.port} in ${g.file}:${g.line}`);
    }
    if (g.port !== undefined && u.port !== undefined && g.port !== u.port) continue;
    if (explicit) {
      // an implicit reference made before the block: the block takes its place
      const group = new UpstreamGroup(u.host, undefined, true, false, file, line);
      main.groups[i] = group;
      return group;
    }
    return g;
  }
  const group = new UpstreamGroup(u.host, u.unix ? undefined : u.port, explicit, u.unix, file, line);
  main.groups.push(group);
  return group;
}

/** The group whose `upstream {}` block is being read, for a directive inside it (a module's too). */
export function upstreamGroupOf(cf: ConfContext): UpstreamGroup {
  return cf.data.upstreamGroup as UpstreamGroup;
}

/** The group for a run-time proxy_pass target (ngx_http_upstream_init_request's search). */
export function findUpstream(main: HttpMainConf, host: string, port: number | undefined): UpstreamGroup | undefined {
  const groups = main.level.get(upstreamMainSlot).groups;
  for (const g of groups) {
    if (g.name.length !== host.length || g.name.toLowerCase() !== host.toLowerCase()) continue;
    if ((g.port === undefined && port === undefined) || g.port === port) return g;
  }
  return undefined;
}

/** Builds every group's peers once the http block is read (ngx_http_upstream_init_main_conf). */
function initGroups(http: HttpMainConf): void {
  for (const g of http.level.get(upstreamMainSlot).groups) {
    g.attachZone('upstream');
    if (g.servers.some((s) => s.resolve)) {
      if (!g.zone) throw new ConfError(`resolving names at run time requires upstream "${g.name}" in ${g.file}:${g.line} to be in shared memory`);
      const core = http.level.get(coreLoc);
      g.resolverArgs ??= core.resolverArgs;
      g.resolverTimeout ??= core.resolverTimeout;
      if (!g.resolverArgs?.length) throw new ConfError(`no resolver defined to resolve names at run time in upstream "${g.name}" in ${g.file}:${g.line}`);
      for (const s of g.servers) {
        if (s.resolve) s.resolve.memory = sharedZone(`upstream-resolved:${g.name}:${s.resolve.host}`, ANSWER_MEMORY);
      }
    }
    if (g.explicit) {
      g.init();
      continue;
    }
    if (g.servers.length) { g.init(); continue; }
    const unix = g.unix;
    if (!unix && g.port === undefined) throw new ConfError(`no port in upstream "${g.name}" in ${g.file}:${g.line}`);
    const addrs = resolveAddresses({ host: g.name, port: g.port, unix, uri: '', hostPort: g.name }, 80);
    if (typeof addrs === 'string') throw new ConfError(`${addrs} in upstream "${g.name}" in ${g.file}:${g.line}`);
    // an IP literal is one server nginx gives weight 0 and max_fails 0; a name's addresses get 1/1/10s
    const literal = addrs.length === 1;
    g.servers.push({
      name: g.name, addrs, weight: 1, maxFails: literal ? 0 : 1, failTimeout: 10, maxConns: 0, backup: false, down: false,
    });
    g.init();
  }
}

function serverDirective(cf: ConfContext, node: { args: string[] }): string | void {
  const group = cf.data.upstreamGroup as UpstreamGroup;
  const a = node.args;
  const { weight, maxConns, maxFails, failTimeout, backup, down, resolve, service } = parseServerParams(cf, a.slice(1), group, true);
  if (service !== undefined && !resolve) throw cf.error(`service upstream "${a[0]}" requires "resolve" parameter`);
  const u = parseUrl(a[0], { uriPart: false });
  if (typeof u === 'string') throw cf.error(`${u} in upstream "${a[0]}"`);
  const literal = u.unix || net.isIP(u.host.replace(/^\[|\]$/g, '')) !== 0;
  if (service !== undefined && u.port !== undefined) throw cf.error(`service upstream "${a[0]}" may not have port`);
  if (service !== undefined && literal) throw cf.error(`service upstream "${a[0]}" requires domain name`);
  if (resolve && !literal) {
    // resolved while running (watchResolvedServers), not now
    const r = { host: u.host.toLowerCase(), port: u.port ?? 80, service };
    group.servers.push({ name: a[0], addrs: [], weight, maxFails, failTimeout, maxConns, backup, down, resolve: r });
    return;
  }
  const addrs = resolveAddresses(u, 80);
  if (typeof addrs === 'string') throw cf.error(`${addrs} in upstream "${a[0]}"`);
  group.servers.push({ name: a[0], addrs, weight, maxFails, failTimeout, maxConns, backup, down });
}

/** The group whose `upstream {}` block is being read. */
const upstreamGroup = (cf: ConfContext): UpstreamGroup => cf.data.upstreamGroup as UpstreamGroup;

function keepaliveSetting(field: 'requests' | 'timeMs' | 'timeoutMs', parse: 'count' | 'time'): Directive['handler'] {
  return (cf, node) => {
    const g = cf.data.upstreamGroup as UpstreamGroup & { kaSet?: Set<string> };
    const v = node.args[0];
    const n = parse === 'count' ? (/^\d+$/.test(v) ? Number(v) : NaN) : parseTime(v);
    if (Number.isNaN(n)) return `invalid value`;
    const ka = (g.keepalive ??= { ...KEEPALIVE_DEFAULTS, max: 0 });
    // hand-written: the value is checked before the duplicate, and the fields live in a shared object
    g.kaSet ??= new Set();
    if (g.kaSet.has(field)) return 'is duplicate';
    g.kaSet.add(field);
    ka[field] = n;
  };
}

const KEEPALIVE_DEFAULTS = { requests: 1000, timeMs: 3_600_000, timeoutMs: 60_000 };

/** `ip_hash`, `hash key [consistent]`, `least_conn`, `random [two [least_conn]]`. */
function balancerDirective(kind: Balancer['kind']): Directive['handler'] {
  return (cf, node) => {
    const g = cf.data.upstreamGroup as UpstreamGroup;
    g.balancer = readBalancer(cf, kind, node.args);
    if (kind === 'hash') g.balanceKey = compileComplex(cf, httpMainOf(cf).variables, node.args[0]);
  };
}

const directives: Directive[] = [
  {
    name: 'upstream', contexts: Ctx.HTTP, args: 1, block: true,
    handler(cf, node) {
      const u = parseUrl(node.args[0], { uriPart: false });
      if (typeof u === 'string' || u.port !== undefined || u.unix) {
        throw cf.error(`invalid upstream name "${node.args[0]}"`);
      }
      const group = upstreamAdd(cf, u, true);
      cf.block(node.children ?? [], Ctx.UPSTREAM, new Level(cf.level), 'upstream', { upstreamGroup: group });
      if (group.servers.length === 0) throw cf.error('no servers are inside upstream');
      if (group.keepalive && group.keepalive.max === 0) group.keepalive = undefined;
    },
  },
  { name: 'server', contexts: Ctx.UPSTREAM, args: [1, Infinity], handler: serverDirective },
  {
    name: 'keepalive', contexts: Ctx.UPSTREAM, args: 1,
    handler(cf, node) {
      const g = cf.data.upstreamGroup as UpstreamGroup;
      // hand-written: the keepalive_* settings may have made the object first (with max 0, "unset")
      if (g.keepalive?.max) return 'is duplicate';
      const n = /^\d+$/.test(node.args[0]) ? Number(node.args[0]) : 0;
      if (n === 0) throw cf.error(`invalid value "${node.args[0]}" in "keepalive" directive`);
      g.keepalive = { ...KEEPALIVE_DEFAULTS, ...g.keepalive, max: n };
    },
  },
  {
    name: 'zone', contexts: Ctx.UPSTREAM, args: [1, 2],
    handler: (cf, node) => readZone(cf, cf.data.upstreamGroup as UpstreamGroup, node.args),
  },
  {
    // nginx 1.27.3+: the resolver of this upstream's `resolve` servers
    name: 'resolver', contexts: Ctx.UPSTREAM, args: [1, Infinity],
    handler: unique(upstreamGroup, 'resolverArgs', (_cf, node, g) => {
      const conf = parseResolverArgs(node.args, parseTime);
      if (typeof conf === 'string') return conf;
      g.resolverArgs = node.args;
    }),
  },
  {
    name: 'resolver_timeout', contexts: Ctx.UPSTREAM, args: 1,
    handler: setting(upstreamGroup, 'resolverTimeout', msecArg),
  },
  { name: 'ip_hash', contexts: Ctx.UPSTREAM, args: 0, handler: balancerDirective('ip_hash') },
  { name: 'hash', contexts: Ctx.UPSTREAM, args: [1, 2], handler: balancerDirective('hash') },
  { name: 'least_conn', contexts: Ctx.UPSTREAM, args: 0, handler: balancerDirective('least_conn') },
  { name: 'random', contexts: Ctx.UPSTREAM, args: [0, 2], handler: balancerDirective('random') },
  { name: 'keepalive_requests', contexts: Ctx.UPSTREAM, args: 1, handler: keepaliveSetting('requests', 'count') },
  { name: 'keepalive_time', contexts: Ctx.UPSTREAM, args: 1, handler: keepaliveSetting('timeMs', 'time') },
  { name: 'keepalive_timeout', contexts: Ctx.UPSTREAM, args: 1, handler: keepaliveSetting('timeoutMs', 'time') },
];

// ---------------------------------------------------------------------------
// Per-request record of upstream tries, behind the $upstream_* variables

/** One try of one peer (ngx_http_upstream_state_t). Times in ms, -1 when not reached. */
export interface UpstreamState {
  /** `$upstream_addr` text; undefined marks the start of another upstream (internal redirect). */
  peer: string | undefined;
  status: number;
  responseTime: number;
  connectTime: number;
  headerTime: number;
  responseLength: number;
  bytesReceived: number;
  bytesSent: number;
}

/** Upstream response header fields as received: names as sent, lowercased names, values. */
export interface HeaderList {
  names: string[];
  lnames: string[];
  values: string[];
}

export interface UpstreamRecord {
  states: UpstreamState[];
  /** Headers and trailers of the latest upstream response (`$upstream_http_*`, `$upstream_trailer_*`). */
  headers: HeaderList | undefined;
  trailers: HeaderList | undefined;
}

/** The request's upstream record, if it used an upstream. */
export function upstreamRecord(r: HttpRequest): UpstreamRecord | undefined {
  return r.upstreamRecord as UpstreamRecord | undefined;
}

/**
 * Starts a new upstream for `r` (ngx_http_upstream_init_request). The record
 * survives internal redirects as nginx's r->upstream_states does.
 */
export function beginUpstream(r: HttpRequest): UpstreamRecord {
  let rec = r.upstreamRecord as UpstreamRecord | undefined;
  if (!rec) {
    rec = { states: [], headers: undefined, trailers: undefined };
    r.upstreamRecord = rec;
  } else if (rec.states.length) {
    // a second upstream for the same request: an empty state separates them with " : "
    rec.states.push(newState(undefined));
  }
  return rec;
}

export function newState(peer: string | undefined): UpstreamState {
  return { peer, status: 0, responseTime: -1, connectTime: -1, headerTime: -1, responseLength: 0, bytesReceived: 0, bytesSent: 0 };
}

function joinStates(r: HttpRequest, item: (s: UpstreamState) => string): VarValue {
  const states = upstreamRecord(r)?.states;
  if (!states || states.length === 0) return undefined;
  let out = '';
  let i = 0;
  for (;;) {
    out += item(states[i]);
    if (++i === states.length) break;
    if (states[i].peer !== undefined) out += ', ';
    else {
      out += ' : ';
      if (++i === states.length) break;
    }
  }
  return out;
}

function msText(ms: number): string {
  if (ms === -1) return '-';
  const v = Math.max(ms, 0);
  return `${Math.floor(v / 1000)}.${String(Math.floor(v % 1000)).padStart(3, '0')}`;
}

/** A header's value from a HeaderList; several fields of one name are joined with ", ". */
export function headerValue(list: HeaderList | undefined, lname: string): VarValue {
  if (!list) return undefined;
  let v: string | undefined;
  for (let i = 0; i < list.lnames.length; i++) {
    if (list.lnames[i] === lname) v = v === undefined ? list.values[i] : v + ', ' + list.values[i];
  }
  return v;
}

/**
 * `$upstream_cookie_name` (ngx_http_parse_set_cookie_lines): the first
 * Set-Cookie field that starts with `name` (any case), spaces, `=`; the
 * value runs from after the spaces up to `;`.
 */
function setCookieValue(list: HeaderList | undefined, name: string): VarValue {
  if (!list) return undefined;
  const lname = name.toLowerCase();
  for (let i = 0; i < list.lnames.length; i++) {
    if (list.lnames[i] !== 'set-cookie') continue;
    const v = list.values[i];
    if (lname.length >= v.length || v.slice(0, lname.length).toLowerCase() !== lname) continue;
    let p = lname.length;
    while (p < v.length && v[p] === ' ') p++;
    if (p === v.length || v[p++] !== '=') continue;
    while (p < v.length && v[p] === ' ') p++;
    const semi = v.indexOf(';', p);
    return v.slice(p, semi < 0 ? v.length : semi);
  }
  return undefined;
}

const varHeaderName = (n: string, prefix: number) => n.slice(prefix).replace(/_/g, '-').toLowerCase();

const variables: HttpVariable[] = [
  { name: 'upstream_addr', noCache: true, get: (r) => joinStates(r, (s) => s.peer ?? '') },
  { name: 'upstream_status', noCache: true, get: (r) => joinStates(r, (s) => (s.status ? String(s.status) : '-')) },
  { name: 'upstream_connect_time', noCache: true, get: (r) => joinStates(r, (s) => msText(s.connectTime)) },
  { name: 'upstream_header_time', noCache: true, get: (r) => joinStates(r, (s) => msText(s.headerTime)) },
  { name: 'upstream_response_time', noCache: true, get: (r) => joinStates(r, (s) => msText(s.responseTime)) },
  { name: 'upstream_response_length', noCache: true, get: (r) => joinStates(r, (s) => String(s.responseLength)) },
  { name: 'upstream_bytes_received', noCache: true, get: (r) => joinStates(r, (s) => String(s.bytesReceived)) },
  { name: 'upstream_bytes_sent', noCache: true, get: (r) => joinStates(r, (s) => String(s.bytesSent)) },
  { name: 'upstream_http_', prefix: true, noCache: true, get: (r, n) => headerValue(upstreamRecord(r)?.headers, varHeaderName(n, 14)) },
  { name: 'upstream_trailer_', prefix: true, noCache: true, get: (r, n) => headerValue(upstreamRecord(r)?.trailers, varHeaderName(n, 17)) },
  { name: 'upstream_cookie_', prefix: true, noCache: true, get: (r, n) => setCookieValue(upstreamRecord(r)?.headers, n.slice(16)) },
];

export const upstreamModule: HttpModule = {
  name: 'ngx_http_upstream_module',
  directives,
  variables,
  postconfiguration: initGroups,
  initWorker(cycle, worker) {
    const http = httpConf(cycle);
    if (!http) return;
    const pools: KeepalivePool[] = [];
    const stops: Array<() => void> = [];
    for (const g of http.level.get(upstreamMainSlot).groups) {
      if (g.resolverArgs && g.servers.some((s) => s.resolve)) {
        const resolver = resolverForArgs(g.resolverArgs, parseTime, g.resolverTimeout!);
        if (resolver) stops.push(watchResolvedServers(g, resolver, g.resolverTimeout!));
      }
      if (!g.keepalive) continue;
      g.pool = new KeepalivePool(g.keepalive);
      pools.push(g.pool);
    }
    if (pools.length || stops.length) {
      worker.onShutdown(() => {
        for (const p of pools) p.close();
        for (const stop of stops) stop();
      });
    }
  },
};

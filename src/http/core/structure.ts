/**
 * ngx_http_core_module, part 1: the structure of `http {}` — servers,
 * `listen`, `server_name`, locations — and turning it into the tables the
 * request path uses (addresses → servers, server → locations).
 */
import net from 'node:net';
import { Level } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import { parseTime } from '../../conf/values.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { Cycle } from '../../core/cycle.ts';
import type { ListenSpec } from '../../core/cycle.ts';
import { HttpMainConf, httpConf, httpMainOf, httpSlot, isHttpModule } from '../http-conf.ts';
import type { HttpModule, ListenConf, LocationConf, LocationMatch, ServerConf } from '../http-conf.ts';
import { checkNesting, indexLocations } from '../location.ts';
import { unique } from '../../conf/setters.ts';
import { errorPageDirectives, sendErrorPage } from './error-page.ts';
import { compileHttpRegex } from '../regex.ts';
import { readServerNameArgs } from '../../core/server-names.ts';
import { checkServerSettings, coreSrv } from './settings.ts';
import { conflictingNames } from '../virtual-server.ts';


function newLocation(name: string, match: LocationMatch, path: string, level: Level, node: ConfNode): LocationConf {
  return { name, match, path, level, children: [], internal: false, file: node.file, line: node.line };
}

function readServer(cf: ConfContext, node: ConfNode): void {
  const http = httpMainOf(cf);
  const level = new Level(cf.level);
  const srv: ServerConf = {
    listens: [], names: [], primaryName: '', level, locations: [], named: new Map(),
    serverLoc: newLocation('', 'noname', '', level, node), file: node.file, line: node.line,
  };
  cf.block(node.children ?? [], Ctx.SERVER, level, 'server', { server: srv, location: undefined });
  if (srv.listens.length === 0) {
    // nginx's default: *:80 as root, *:8000 otherwise
    const port = process.getuid?.() === 0 ? 80 : 8000;
    srv.listens.push(parseListen(cf, [String(port)], node));
  }
  if (srv.names.length === 0) srv.names.push({ name: '' });
  // $server_name: the first name, a regex with its "~", a ".x" name without its dot
  const first = srv.names[0];
  srv.primaryName = first.regex ? `~${first.name}` : first.name.startsWith('.') ? first.name.slice(1) : first.name;
  http.servers.push(srv);
}

function readLocation(cf: ConfContext, node: ConfNode): void {
  const srv = cf.data.server as ServerConf;
  const parent = cf.data.location as LocationConf | undefined;
  const a = node.args;
  let mod = '';
  let name: string;
  if (a.length === 2) {
    mod = a[0];
    name = a[1];
    if (!['=', '~', '~*', '^~'].includes(mod)) throw cf.error(`invalid location modifier "${mod}"`);
  } else {
    name = a[0];
    const m = /^(=|~\*|~|\^~)(.+)$/.exec(name);
    if (m && !name.startsWith('@')) { mod = m[1]; name = m[2]; }
  }
  const level = new Level(cf.level);
  let loc: LocationConf;
  if (mod === '~' || mod === '~*') {
    loc = newLocation(name, 'regex', name, level, node);
    const re = compileHttpRegex(cf, httpMainOf(cf).variables, name, mod === '~*');
    loc.regex = re.regex;
    if (re.namedIndexes.length) loc.regexNames = re.namedIndexes;
  } else if (mod === '=') {
    loc = newLocation(name, 'exact', name, level, node);
  } else if (mod === '^~') {
    loc = newLocation(name, 'prefix-stop', name, level, node);
  } else if (name.startsWith('@')) {
    loc = newLocation(name, 'named', name, level, node);
  } else {
    loc = newLocation(name, 'prefix', name, level, node);
  }
  const err = checkNesting(parent, loc);
  if (err) throw cf.error(err);
  if (loc.match === 'named') {
    // nginx accepts a second one with the same name; the first is used
    if (!srv.named.has(name)) srv.named.set(name, loc);
  } else {
    const siblings = parent ? parent.children : srv.locations;
    const dup = siblings.find((s) => s.match !== 'regex' && s.match !== 'noname' && loc.match !== 'regex'
      && s.path === loc.path && (s.match === 'exact') === (loc.match === 'exact'));
    if (dup) throw cf.error(`duplicate location "${name}"`);
    loc.parent = parent;
    siblings.push(loc);
  }
  cf.block(node.children ?? [], Ctx.LOCATION, level, 'location', { location: loc });
}

/**
 * An anonymous location inside `parent` (nginx's "noname" locations made by
 * `if` and `limit_except`): a level of its own, merged from the parent's,
 * never chosen by URI. Its block is read with context bit `ctx`.
 */
export function readAnonymousLocation(cf: ConfContext, node: ConfNode, parent: LocationConf, ctx: number, level = new Level(cf.level)): LocationConf {
  const loc = newLocation(parent.name, 'noname', parent.path, level, node);
  loc.noname = true;
  loc.parent = parent;
  cf.block(node.children ?? [], ctx, level, 'location', { location: loc });
  return loc;
}

/** Methods `limit_except` knows (nginx's ngx_methods_names). */
const KNOWN_METHODS = new Set([
  'GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'MKCOL', 'COPY', 'MOVE', 'OPTIONS',
  'PROPFIND', 'PROPPATCH', 'LOCK', 'UNLOCK', 'PATCH',
]);

function readLimitExcept(cf: ConfContext, node: ConfNode): string | void {
  const loc = cf.data.location as LocationConf;
  // hand-written: the block belongs to the location itself, not to a module's slot
  if (loc.limitExcept) return 'is duplicate';
  const methods = new Set<string>();
  for (const m of node.args) {
    const upper = m.toUpperCase();
    if (!KNOWN_METHODS.has(upper)) throw cf.error(`invalid method "${m}"`);
    methods.add(upper);
  }
  if (methods.has('GET')) methods.add('HEAD');
  loc.limitExcept = { methods, loc: readAnonymousLocation(cf, node, loc, Ctx.LMT) };
}

/** Parses `listen` arguments into a ListenConf (address forms: port, host, host:port, [v6]:port, unix:path). */
export function parseListen(cf: ConfContext, args: string[], node?: ConfNode): ListenConf {
  const addr = args[0];
  const spec: ListenSpec = { key: '', protocol: 'http' };
  if (addr.startsWith('unix:')) {
    spec.path = addr.slice(5);
    spec.key = addr;
  } else {
    let host: string;
    let port: string;
    const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(addr);
    if (v6) { host = v6[1]; port = v6[2] ?? '80'; }
    else if (/^\d+$/.test(addr)) { host = '*'; port = addr; }
    else {
      const i = addr.lastIndexOf(':');
      if (i >= 0) { host = addr.slice(0, i); port = addr.slice(i + 1); }
      else { host = addr; port = '80'; }
    }
    const p = Number(port);
    if (!/^\d+$/.test(port) || p < 1 || p > 65535) {
      throw new ConfError(`invalid port in "${addr}" of the "listen" directive`, (node ?? cf.node)?.file, (node ?? cf.node)?.line);
    }
    if (host === '*') host = '0.0.0.0';
    if (host === 'localhost') host = '127.0.0.1';
    if (!net.isIP(host)) throw cf.error(`host not found in "${addr}" of the "listen" directive`);
    spec.host = host;
    spec.port = p;
    spec.key = net.isIPv6(host) ? `[${host}]:${p}` : `${host}:${p}`;
  }
  const lc: ListenConf = { spec, defaultServer: false, ssl: false, http2: false, proxyProtocol: false };
  for (const opt of args.slice(1)) {
    const [k, v] = opt.split('=', 2);
    switch (k) {
      case 'default_server': case 'default': lc.defaultServer = true; break;
      case 'ssl': lc.ssl = true; break;
      case 'http2': lc.http2 = true; break;
      case 'proxy_protocol': lc.proxyProtocol = true; break;
      case 'backlog':
        if (!/^\d+$/.test(v ?? '') || Number(v) === 0) throw cf.error(`invalid backlog "${opt}"`);
        spec.backlog = Number(v);
        break;
      case 'ipv6only': spec.ipv6only = v === 'on'; break;
      case 'so_keepalive': {
        // on | off | [keepidle]:[keepintvl]:[keepcnt]; Node sets the idle time only
        if (v === 'on' || v === 'off') { spec.keepalive = v === 'on'; break; }
        const [idle, intvl, cnt] = (v ?? '').split(':');
        if (cnt === undefined || [idle, intvl].some((t) => t !== '' && Number.isNaN(parseTime(t))) || (cnt !== '' && !/^\d+$/.test(cnt))) {
          throw cf.error(`invalid so_keepalive value: "${v}"`);
        }
        spec.keepalive = true;
        if (idle) spec.keepaliveInitialDelayMs = parseTime(idle);
        break;
      }
      case 'reuseport': case 'bind': case 'deferred': case 'fastopen': case 'rcvbuf': case 'sndbuf':
      case 'setfib': case 'accept_filter': case 'quic': case 'multipath':
        break;
      default:
        throw cf.error(`invalid parameter "${opt}"`);
    }
  }
  return lc;
}

/** `listen 127.0.0.1:8000-8003` (nginx 1.27.3): one address per port of the range. */
function portRange(cf: ConfContext, addr: string): string[] {
  const m = /^(.*?)(\d+)-(\d+)$/.exec(addr);
  if (!m || addr.startsWith('unix:') || (m[1] !== '' && !m[1].endsWith(':'))) return [addr];
  const from = Number(m[2]);
  const to = Number(m[3]);
  if (from < 1 || to > 65535 || from > to) throw cf.error(`invalid port range in "${addr}" of the "listen" directive`);
  const out: string[] = [];
  for (let p = from; p <= to; p++) out.push(`${m[1]}${p}`);
  return out;
}

function readServerNames(cf: ConfContext, node: ConfNode): void {
  const srv = cf.data.server as ServerConf;
  readServerNameArgs(cf, node.args, srv.names, httpMainOf(cf).variables, srv.listens[0]?.spec.key ?? '0.0.0.0:80');
}

const directives: Directive[] = [
  {
    name: 'http', contexts: Ctx.MAIN, args: 0, block: true,
    handler: unique(httpSlot, 'conf', (cf, node, slot) => {
      const level = new Level(cf.level);
      const modules = cf.registry.modules.filter(isHttpModule) as HttpModule[];
      const http = new HttpMainConf(level, modules);
      for (const m of modules) for (const v of m.variables ?? []) http.variables.define(v);
      cf.block(node.children ?? [], Ctx.HTTP, level, 'http', { http });
      // as nginx, variables may be used before a map or set defines them
      const unknown = http.variables.unresolved();
      if (unknown !== undefined) throw new ConfError(`unknown "${unknown}" variable`);
      level.applyDefaults();
      finishHttp(http);
      for (const srv of http.servers) {
        const err = checkServerSettings(srv.level.get(coreSrv));
        if (err) throw new ConfError(err, node.file, node.endLine ?? node.line);
      }
      for (const addr of http.addresses.values()) {
        for (const name of conflictingNames(addr)) cf.warn(`conflicting server name "${name}" on ${addr.spec.key}, ignored`, false);
      }
      http.errorPage = sendErrorPage;
      for (const m of modules) m.postconfiguration?.(http, cf);
      slot.conf = http;
    }),
  },
  { name: 'server', contexts: Ctx.HTTP, args: 0, block: true, handler: readServer },
  { name: 'location', contexts: Ctx.SERVER | Ctx.LOCATION, args: [1, 2], block: true, handler: readLocation },
  {
    name: 'listen', contexts: Ctx.SERVER, args: [1, Infinity],
    handler(cf, node) {
      const srv = cf.data.server as ServerConf;
      for (const addr of portRange(cf, node.args[0])) srv.listens.push(parseListen(cf, [addr, ...node.args.slice(1)]));
    },
  },
  { name: 'server_name', contexts: Ctx.SERVER, args: [1, Infinity], handler: readServerNames },
  {
    name: 'internal', contexts: Ctx.LOCATION, args: 0,
    handler(cf) { (cf.data.location as LocationConf).internal = true; },
  },
  { name: 'limit_except', contexts: Ctx.LOCATION, args: [1, Infinity], block: true, handler: readLimitExcept },
];

/** Merges levels downward and builds the address → servers table. */
function finishHttp(http: HttpMainConf): void {
  const mergeLocations = (level: Level, list: Iterable<LocationConf>) => {
    for (const loc of list) {
      loc.level.mergeFrom(level);
      mergeLocations(loc.level, loc.children);
      if (loc.limitExcept) mergeLocations(loc.level, [loc.limitExcept.loc]);
    }
  };
  for (const srv of http.servers) {
    srv.level.mergeFrom(http.level);
    mergeLocations(srv.level, srv.locations);
    mergeLocations(srv.level, srv.named.values());
    indexLocations(srv.locations);
    for (const lc of srv.listens) {
      let addr = http.addresses.get(lc.spec.key);
      if (!addr) {
        addr = { spec: lc.spec, servers: [], defaultServer: srv, ssl: false, http2: false };
        http.addresses.set(lc.spec.key, addr);
      }
      if (lc.defaultServer) {
        if (addr.defaultServer !== srv && addr.servers.some((s) => s.listens.some((l) => l.defaultServer && l.spec.key === lc.spec.key))) {
          throw new ConfError(`a duplicate default server for ${lc.spec.key}`, srv.file, srv.line);
        }
        addr.defaultServer = srv;
      }
      addr.ssl ||= lc.ssl;
      addr.http2 ||= lc.http2;
      if (lc.proxyProtocol) addr.proxyProtocol = true;
      if (!addr.servers.includes(srv)) addr.servers.push(srv);
    }
  }
}

/** The structure directives, with `error_page` (its handling lives in error-page.ts). */
export const httpStructureDirectives = [...directives, ...errorPageDirectives];

/** Registers the http listeners with the cycle (nginx binds a wildcard once per port). */
export function addHttpListeners(cycle: Cycle): void {
  const http = httpConf(cycle);
  if (!http) return;
  for (const addr of http.addresses.values()) cycle.addListener(addr.spec);
}

/**
 * ngx_stream_core_module: the `stream {}` block, its `server {}`s and
 * `listen`, `error_log`, `tcp_nodelay`, the preread and resolver settings,
 * the core variables ($remote_addr, $bytes_sent, $session_time, $status,
 * ...), and what a worker does with the block: listen on its addresses and
 * hand every connection to a session (src/stream/handler.ts).
 */
import os from 'node:os';
import { isMainThread } from 'node:worker_threads';
import { defineSlot, inheritUnset, Level } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { flagArg, msecArg, numberArg, sizeArg } from '../../conf/values.ts';
import { listOf, setting, unique } from '../../conf/setters.ts';
import type { Cycle } from '../../core/cycle.ts';
import { checkLogFile, ErrorLog, mainErrorLog } from '../../core/error-log.ts';
import type { ErrorLogSpec } from '../../core/error-log.ts';
import { parseErrorLog } from '../../core/error-log-args.ts';
import { currentTimeIso8601, currentTimeLocal } from '../../core/local-time.ts';
import { addressBytes } from '../../core/inet.ts';
import { proxyProtocolTlv } from '../../core/proxy-protocol.ts';
import { NGINX_VERSION } from '../../core/version.ts';
import { parseResolverArgs } from '../../upstream/resolver.ts';
import type { ResolverConf } from '../../upstream/resolver.ts';
import { isStreamModule, StreamMainConf, streamConf, streamMainOf, streamServerOf, streamSlot } from '../conf.ts';
import type { StreamAddress, StreamModule, StreamServerConf, StreamVariable } from '../conf.ts';
import { StreamSessions } from '../handler.ts';
import { parseStreamListen } from '../listen.ts';
import { udpDispatcher } from '../udp.ts';
import { conflictingNames, readServerNameArgs } from '../../core/server-names.ts';

export interface StreamCoreSrvConf {
  errorLogs?: ErrorLogSpec[];
  tcpNodelay?: boolean;
  prereadBufferSize?: number;
  prereadTimeout?: number;
  proxyProtocolTimeout?: number;
  resolver?: ResolverConf;
  resolverTimeout?: number;
}

const STREAM_CORE_DEFAULTS = {
  tcpNodelay: true, prereadBufferSize: 16384, prereadTimeout: 30_000, proxyProtocolTimeout: 30_000, resolverTimeout: 30_000,
} as const satisfies StreamCoreSrvConf;

export const streamCoreSrv = defineSlot<StreamCoreSrvConf, typeof STREAM_CORE_DEFAULTS>('stream_core_srv', () => ({}), inheritUnset, STREAM_CORE_DEFAULTS);

function readStream(cf: ConfContext, node: ConfNode, slot: { conf?: StreamMainConf }): void {
  const level = new Level(cf.level);
  const modules = cf.registry.modules.filter(isStreamModule);
  const stream = new StreamMainConf(level, modules);
  for (const m of modules) for (const v of m.variables ?? []) stream.variables.define(v);
  cf.block(node.children ?? [], Ctx.STREAM, level, 'stream', { stream });
  level.applyDefaults();
  // a server without a handler is allowed since nginx 1.25.5 (its sessions end with 500)
  for (const srv of stream.servers) srv.level.mergeFrom(level);
  for (const m of modules) m.postconfiguration?.(stream, cf);
  // as nginx, variables may be used before a map defines them
  const unknown = stream.variables.unresolved();
  if (unknown !== undefined) throw new ConfError(`unknown "${unknown}" variable`);
  for (const addr of groupAddresses(stream.servers)) stream.addresses.set(addr.listen.spec.key, addr);
  for (const addr of stream.addresses.values()) {
    for (const name of conflictingNames(addr)) cf.warn(`conflicting server name "${name}" on ${addr.listen.addrText}, ignored`, false);
  }
  slot.conf = stream;
}

/**
 * ngx_stream_add_addresses: servers listening on one address share it; the
 * first (or the `default_server`) serves when no name chooses another, and
 * `ssl` or `proxy_protocol` on any of its listens holds for the address.
 */
function groupAddresses(servers: StreamServerConf[]): StreamAddress[] {
  const byKey = new Map<string, StreamAddress>();
  for (const srv of servers) {
    for (const listen of srv.listens) {
      const a = byKey.get(listen.spec.key);
      if (!a) {
        byKey.set(listen.spec.key, { listen: { ...listen }, defaultServer: srv, servers: [srv] });
        continue;
      }
      if (listen.defaultServer) {
        if (a.listen.defaultServer) throw new ConfError(`a duplicate default server for ${listen.addrText}`, srv.file, srv.line);
        a.defaultServer = srv;
      }
      a.listen = { ...a.listen, ssl: a.listen.ssl || listen.ssl, proxyProtocol: a.listen.proxyProtocol || listen.proxyProtocol, defaultServer: a.listen.defaultServer || listen.defaultServer };
      a.servers.push(srv);
    }
  }
  return [...byKey.values()];
}

function readServer(cf: ConfContext, node: ConfNode): void {
  const stream = streamMainOf(cf);
  const srv: StreamServerConf = { listens: [], names: [], primaryName: '', level: new Level(cf.level), file: node.file, line: node.line };
  stream.servers.push(srv);
  cf.block(node.children ?? [], Ctx.STREAM_SERVER, srv.level, 'server', { streamServer: srv });
  if (srv.listens.length === 0) throw new ConfError(`no "listen" is defined for server in ${srv.file}:${srv.line}`);
  if (srv.names.length === 0) srv.names.push({ name: '' });
  // $server_name: the first name, a regex with its "~", a ".x" name without its dot
  const first = srv.names[0];
  srv.primaryName = first.regex ? `~${first.name}` : first.name.startsWith('.') ? first.name.slice(1) : first.name;
}

/** `server_name` (ngx_stream_core_server_name): exact names, wildcards and `~` regexes, as http's. */
function readServerNames(cf: ConfContext, node: ConfNode): void {
  const srv = streamServerOf(cf);
  readServerNameArgs(cf, node.args, srv.names, streamMainOf(cf).variables, srv.listens[0]?.addrText ?? '0.0.0.0:80');
}

function readListen(cf: ConfContext, node: ConfNode): void {
  const srv = streamServerOf(cf);
  for (const listen of parseStreamListen(cf, node.args)) {
    // servers may share an address (virtual servers, nginx ≥ 1.25.5); one server may not list it twice
    if (srv.listens.some((l) => l.spec.key === listen.spec.key)) throw cf.error(`duplicate "${listen.addrText}" address and port pair`);
    srv.listens.push(listen);
  }
}

const ANY = Ctx.STREAM | Ctx.STREAM_SERVER;

const directives: Directive[] = [
  { name: 'stream', contexts: Ctx.MAIN, args: 0, block: true, handler: unique(streamSlot, 'conf', readStream) },
  { name: 'server', contexts: Ctx.STREAM, args: 0, block: true, handler: readServer },
  { name: 'listen', contexts: Ctx.STREAM_SERVER, args: [1, Infinity], handler: readListen },
  { name: 'server_name', contexts: Ctx.STREAM_SERVER, args: [1, Infinity], handler: readServerNames },
  { name: 'server_names_hash_max_size', contexts: Ctx.STREAM, args: 1, handler: (cf, n) => { numberArg(cf, n.args[0]); } },
  { name: 'server_names_hash_bucket_size', contexts: Ctx.STREAM, args: 1, handler: (cf, n) => { numberArg(cf, n.args[0]); } },
  {
    name: 'error_log', contexts: ANY, args: [1, Infinity],
    handler: listOf(streamCoreSrv, 'errorLogs', (cf, node) => parseErrorLog(cf, node.args)),
  },
  { name: 'tcp_nodelay', contexts: ANY, args: 'flag', handler: setting(streamCoreSrv, 'tcpNodelay', flagArg) },
  { name: 'preread_buffer_size', contexts: ANY, args: 1, handler: setting(streamCoreSrv, 'prereadBufferSize', sizeArg) },
  { name: 'preread_timeout', contexts: ANY, args: 1, handler: setting(streamCoreSrv, 'prereadTimeout', msecArg) },
  { name: 'proxy_protocol_timeout', contexts: ANY, args: 1, handler: setting(streamCoreSrv, 'proxyProtocolTimeout', msecArg) },
  { name: 'resolver_timeout', contexts: ANY, args: 1, handler: setting(streamCoreSrv, 'resolverTimeout', msecArg) },
  {
    name: 'resolver', contexts: ANY, args: [1, Infinity],
    handler: unique(streamCoreSrv, 'resolver', (cf, node, c) => {
      const r = parseResolverArgs(node.args, (s) => msecArg(cf, s));
      if (typeof r === 'string') throw cf.error(r);
      c.resolver = r;
    }),
  },
  // nginx sizes its variables hash with these; a JavaScript Map needs no tuning
  { name: 'variables_hash_max_size', contexts: Ctx.STREAM, args: 1, handler: (cf, n) => { numberArg(cf, n.args[0]); } },
  { name: 'variables_hash_bucket_size', contexts: Ctx.STREAM, args: 1, handler: (cf, n) => { numberArg(cf, n.args[0]); } },
];

/** `$session_time` and the `$upstream_*` times: seconds with milliseconds. */
export function msText(ms: number): string {
  const v = Math.max(0, Math.floor(ms));
  return `${Math.floor(v / 1000)}.${String(v % 1000).padStart(3, '0')}`;
}

const hostname = os.hostname();

const variables: StreamVariable[] = [
  {
    name: 'binary_remote_addr',
    get(s) { const b = addressBytes(s.remoteAddress); return b ? String.fromCharCode(...b) : undefined; },
  },
  { name: 'remote_addr', get: (s) => s.remoteAddress },
  { name: 'remote_port', get: (s) => (s.remotePort ? String(s.remotePort) : '') },
  { name: 'server_addr', get: (s) => s.localAddress },
  { name: 'server_port', get: (s) => (s.localPort ? String(s.localPort) : '') },
  { name: 'bytes_sent', get: (s) => String(s.sent) },
  { name: 'bytes_received', get: (s) => String(s.received) },
  { name: 'session_time', noCache: true, get: (s) => msText(performance.now() - s.startHr) },
  { name: 'status', noCache: true, get: (s) => String(s.status).padStart(3, '0') },
  { name: 'connection', get: (s) => String(s.number) },
  { name: 'server_name', get: (s) => s.server.primaryName },
  { name: 'nginx_version', get: () => NGINX_VERSION },
  { name: 'hostname', get: () => hostname },
  { name: 'pid', get: () => String(process.pid) },
  { name: 'msec', noCache: true, get: () => (Date.now() / 1000).toFixed(3) },
  { name: 'time_iso8601', noCache: true, get: () => currentTimeIso8601() },
  { name: 'time_local', noCache: true, get: () => currentTimeLocal() },
  { name: 'protocol', get: (s) => (s.listen.udp ? 'UDP' : 'TCP') },
  { name: 'proxy_protocol_addr', get: (s) => s.proxyProtocol?.srcAddr },
  { name: 'proxy_protocol_port', get: (s) => (s.proxyProtocol ? String(s.proxyProtocol.srcPort) : undefined) },
  { name: 'proxy_protocol_server_addr', get: (s) => s.proxyProtocol?.dstAddr },
  { name: 'proxy_protocol_server_port', get: (s) => (s.proxyProtocol ? String(s.proxyProtocol.dstPort) : undefined) },
  { name: 'proxy_protocol_tlv_', prefix: true, get: (s, name) => (s.proxyProtocol ? proxyProtocolTlv(s.proxyProtocol, name.slice(19)) : undefined) },
];

/** Every distinct error_log list of the block's levels. */
function errorLogLists(stream: StreamMainConf): Set<ErrorLogSpec[]> {
  const lists = new Set<ErrorLogSpec[]>();
  for (const srv of stream.servers) {
    const specs = srv.level.get(streamCoreSrv).errorLogs;
    if (specs) lists.add(specs);
  }
  return lists;
}

export const streamCoreModule: StreamModule = {
  name: 'ngx_stream_core_module',
  directives,
  variables,
  initCycle(cycle: Cycle) {
    const stream = streamConf(cycle);
    if (!stream) return;
    for (const a of stream.addresses.values()) cycle.addListener(a.listen.spec);
    // the master checks (and creates) the log files, as nginx opens them at startup
    if (!isMainThread) return;
    for (const specs of errorLogLists(stream)) {
      for (const s of specs) {
        const err = checkLogFile(s.file);
        if (err) throw new ConfError(err);
      }
    }
  },
  initWorker(cycle, worker) {
    const stream = streamConf(cycle);
    if (!stream) return;
    const logs = new Map<ErrorLogSpec[], ErrorLog>();
    for (const specs of errorLogLists(stream)) {
      try {
        logs.set(specs, new ErrorLog(specs));
      } catch (e) {
        mainErrorLog().crit(`open() "${(e as NodeJS.ErrnoException).path ?? specs[0]?.file}" failed: ${(e as Error).message}`);
      }
    }
    const logOf = (a: StreamAddress) => {
      const specs = a.defaultServer.level.get(streamCoreSrv).errorLogs;
      return (specs && logs.get(specs)) || mainErrorLog();
    };
    const sessions = new StreamSessions(stream, logOf, (a) => {
      const c = a.defaultServer.level.get(streamCoreSrv);
      return { tcpNodelay: c.tcpNodelay!, proxyProtocolTimeout: c.proxyProtocolTimeout! };
    });
    for (const address of stream.addresses.values()) {
      const key = address.listen.spec.key;
      if (address.listen.udp) worker.onDatagram(key, udpDispatcher((client) => sessions.acceptUdp(address, client)));
      else worker.onConnection(key, (socket) => sessions.accept(address, socket));
    }
    // a graceful stop leaves TCP sessions running (nginx does not close them); a hard one ends them
    worker.onShutdown((graceful) => {
      if (graceful) sessions.endUdpSessions();
      else sessions.terminateAll();
    });
    worker.onClose(() => { for (const log of logs.values()) log.close(); });
  },
};

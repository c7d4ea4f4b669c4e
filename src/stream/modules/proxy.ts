/**
 * ngx_stream_proxy_module: `proxy_pass` and the settings of a proxied
 * session (timeouts, next upstream, half-close, rates, PROXY protocol).
 * The session itself runs in src/stream/proxy-session.ts.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { flagArg, msecArg, numberArg, parseSize, sizeArg } from '../../conf/values.ts';
import { setting, unique } from '../../conf/setters.ts';
import { parseUrl } from '../../upstream/address.ts';
import { Resolver } from '../../upstream/resolver.ts';
import type { ResolverConf } from '../../upstream/resolver.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { streamMainOf, streamServerOf } from '../conf.ts';
import type { StreamMainConf, StreamModule } from '../conf.ts';
import { StreamProxy } from '../proxy-session.ts';
import { UdpProxy } from '../udp-proxy-session.ts';
import type { ProxySettings } from '../proxy-session.ts';
import type { ProxyTarget } from '../proxy-target.ts';
import { parseLocalAddress } from '../listen.ts';
import type { LocalAddress } from '../listen.ts';
import type { StreamSession } from '../session.ts';
import { streamCoreSrv } from './core.ts';
import { findStreamUpstream, streamUpstreamAdd, streamUpstreams } from './upstream.ts';
import { upstreamTlsDirectives } from '../../tls/upstream-directives.ts';
import type { UpstreamSslConf } from '../../tls/upstream-tls.ts';

interface ProxyConf {
  /** proxy_pass without variables: the group's index in the block's list. */
  upstream?: number;
  /** proxy_pass with variables. */
  upstreamValue?: ComplexValue<StreamSession>;
  connectTimeout?: number;
  timeout?: number;
  bufferSize?: number;
  uploadRate?: ComplexValue<StreamSession>;
  downloadRate?: ComplexValue<StreamSession>;
  requests?: number;
  responses?: number;
  nextUpstream?: boolean;
  nextUpstreamTries?: number;
  nextUpstreamTimeout?: number;
  proxyProtocol?: boolean;
  halfClose?: boolean;
  socketKeepalive?: boolean;
  /** proxy_bind: an address, a string with variables, or null for `off`. */
  bind?: LocalAddress | ComplexValue<StreamSession> | null;
  /** Built once the block is read, for the sessions of this server. */
  settings?: ProxySettings;
  target?: ProxyTarget;
}

const PROXY_DEFAULTS = {
  connectTimeout: 60_000, timeout: 600_000, bufferSize: 16384, requests: 0, responses: 0x7fffffff,
  nextUpstream: true, nextUpstreamTries: 0, nextUpstreamTimeout: 0, proxyProtocol: false, halfClose: false, socketKeepalive: false,
} as const satisfies ProxyConf;

const proxySrv = defineSlot<ProxyConf, typeof PROXY_DEFAULTS>('stream_proxy_srv', () => ({}), inheritUnset, PROXY_DEFAULTS);

/** `proxy_ssl` and the proxy_ssl_* settings (TLS to the upstream), merged field by field. */
interface ProxySslConf extends UpstreamSslConf<StreamSession> {
  enable?: boolean;
}

/** ngx_stream_proxy_merge_srv_conf's defaults for TLS to upstreams. */
const PROXY_SSL_DEFAULTS = {
  enable: false, sessionReuse: true, serverName: false, verify: false, verifyDepth: 1, protocols: ['TLSv1.2', 'TLSv1.3'], ciphers: 'DEFAULT',
} as const satisfies ProxySslConf;

const proxySslSrv = defineSlot<ProxySslConf, typeof PROXY_SSL_DEFAULTS>('stream_proxy_ssl_srv', () => ({}), inheritUnset, PROXY_SSL_DEFAULTS);

function proxySslConf(cf: ConfContext): ProxySslConf {
  const c = cf.get(proxySslSrv);
  c.confPrefix = cf.paths.confPrefix;
  return c;
}

function proxyPass(cf: ConfContext, node: ConfNode): string | void {
  const conf = cf.get(proxySrv);
  // hand-written: proxy_pass stores one of two fields (a group, or a value with variables)
  if (conf.upstream !== undefined || conf.upstreamValue) return 'is duplicate';
  streamServerOf(cf).handler = proxyHandler;
  const text = node.args[0];
  const value = compileComplex(cf, streamMainOf(cf).variables, text);
  if (value.constant === undefined) {
    conf.upstreamValue = value;
    return;
  }
  const u = parseUrl(text, { uriPart: false });
  if (typeof u === 'string') throw cf.error(`${u} in upstream "${text}"`);
  conf.upstream = streamUpstreamAdd(cf, u, false);
}

/** A row for a value stored in ProxyConf (stream and server contexts). */
function row<K extends keyof ProxyConf>(name: string, field: K, parse: (cf: ConfContext, v: string) => ProxyConf[K], args: Directive['args'] = 1): Directive {
  return { name, contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args, handler: setting(proxySrv, field, parse) };
}

/** ngx_stream_set_complex_value_size_slot: a size, or a string with variables evaluated per session. */
function rateSetting(name: string, field: 'uploadRate' | 'downloadRate'): Directive {
  return {
    name, contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: 1,
    handler: unique(proxySrv, field, (cf, n, conf) => {
      const v = compileComplex(cf, streamMainOf(cf).variables, n.args[0]);
      if (v.constant !== undefined && Number.isNaN(parseSize(v.constant))) return 'invalid value';
      conf[field] = v;
    }),
  };
}

function proxyBind(cf: ConfContext, node: ConfNode, conf: ProxyConf): void {
  const [text, flag] = node.args;
  if (node.args.length === 1 && text === 'off') {
    conf.bind = null;
    return;
  }
  const value = compileComplex(cf, streamMainOf(cf).variables, text);
  if (value.constant === undefined) conf.bind = value;
  else {
    const addr = parseLocalAddress(text);
    if (!addr) throw cf.error(`invalid address "${text}"`);
    conf.bind = addr;
  }
  if (flag === undefined) return;
  if (flag !== 'transparent') throw cf.error(`invalid parameter "${flag}"`);
  // nginx says so (as an emerg) and goes on where IP_TRANSPARENT is missing; Node cannot set it
  cf.warn('transparent proxying is not supported on this platform, ignored');
}

/** Directives nginx has for what Gatehouse does not tune (socket buffers): values are checked, then ignored. */
function accepted(name: string, parse: (cf: ConfContext, v: string) => unknown): Directive {
  return { name, contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: 1, handler: (cf, n) => { parse(cf, n.args[0]); } };
}

const directives: Directive[] = [
  { name: 'proxy_pass', contexts: Ctx.STREAM_SERVER, args: 1, handler: proxyPass },
  { name: 'proxy_bind', contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: [1, 2], handler: unique(proxySrv, 'bind', proxyBind) },
  row('proxy_connect_timeout', 'connectTimeout', msecArg),
  row('proxy_timeout', 'timeout', msecArg),
  row('proxy_buffer_size', 'bufferSize', sizeArg),
  row('proxy_requests', 'requests', numberArg),
  row('proxy_responses', 'responses', numberArg),
  row('proxy_next_upstream', 'nextUpstream', flagArg, 'flag'),
  row('proxy_next_upstream_tries', 'nextUpstreamTries', numberArg),
  row('proxy_next_upstream_timeout', 'nextUpstreamTimeout', msecArg),
  row('proxy_protocol', 'proxyProtocol', flagArg, 'flag'),
  row('proxy_half_close', 'halfClose', flagArg, 'flag'),
  row('proxy_socket_keepalive', 'socketKeepalive', flagArg, 'flag'),
  rateSetting('proxy_upload_rate', 'uploadRate'),
  rateSetting('proxy_download_rate', 'downloadRate'),
  { name: 'proxy_ssl', contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: 'flag', handler: setting(proxySslSrv, 'enable', flagArg) },
  ...upstreamTlsDirectives('proxy_', Ctx.STREAM | Ctx.STREAM_SERVER, proxySslConf, (cf) => streamMainOf(cf).variables),
  {
    name: 'proxy_ssl_alpn', contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: [1, Infinity],
    handler: setting(proxySslSrv, 'alpn', (cf, _v, args) => args.map((a) => compileComplex(cf, streamMainOf(cf).variables, a))),
  },
  accepted('proxy_socket_rcvbuf', sizeArg),
  accepted('proxy_socket_sndbuf', sizeArg),
];

/** One resolver per `resolver` line and worker, made when a session first needs it. */
const resolvers = new WeakMap<ResolverConf, Resolver>();

function resolverOf(conf: ResolverConf | undefined, timeoutMs: number): Resolver | undefined {
  if (!conf) return undefined;
  let r = resolvers.get(conf);
  if (!r) {
    r = new Resolver(conf, timeoutMs);
    resolvers.set(conf, r);
  }
  return r;
}

/** Builds each proxying server's settings and target once, after merging. */
function prepareServers(stream: StreamMainConf): void {
  const groups = stream.level.get(streamUpstreams).groups;
  for (const srv of stream.servers) {
    if (srv.handler !== proxyHandler) continue;
    const c = srv.level.get(proxySrv);
    const core = srv.level.get(streamCoreSrv);
    c.settings = {
      connectTimeout: c.connectTimeout, timeout: c.timeout, nextUpstream: c.nextUpstream,
      nextUpstreamTries: c.nextUpstreamTries, nextUpstreamTimeout: c.nextUpstreamTimeout, halfClose: c.halfClose,
      proxyProtocol: c.proxyProtocol, socketKeepalive: c.socketKeepalive, tcpNodelay: core.tcpNodelay,
      uploadRate: c.uploadRate, downloadRate: c.downloadRate, bind: c.bind ?? undefined,
      requests: c.requests, responses: c.responses,
    };
    const ssl = srv.level.get(proxySslSrv);
    if (ssl.enable) c.settings.tls = ssl;
    if (c.upstreamValue) {
      const resolver = core.resolver;
      const timeout = core.resolverTimeout;
      c.target = {
        value: c.upstreamValue,
        find: (host, port) => findStreamUpstream(stream, host, port),
        get resolver() { return resolverOf(resolver, timeout); },
      };
    } else {
      c.target = { group: groups[c.upstream!] };
    }
  }
}

/** Where a session goes instead of its server's proxy_pass, decided by a module before content (the gateway's stream routes). */
export const sessionTargets = new WeakMap<StreamSession, ProxyTarget>();

function proxyHandler(s: StreamSession): void {
  const c = s.level.get(proxySrv);
  const own = sessionTargets.get(s);
  const target = own ?? c.target!;
  let settings = c.settings!;
  if (own && 'picker' in own && (own.connectTimeout !== undefined || own.timeout !== undefined)) {
    settings = { ...settings, connectTimeout: own.connectTimeout ?? settings.connectTimeout, timeout: own.timeout ?? settings.timeout };
  }
  if (s.listen.udp) new UdpProxy(s, settings).start(target);
  else new StreamProxy(s, settings).start(target);
}

export const streamProxyModule: StreamModule = {
  name: 'ngx_stream_proxy_module',
  directives,
  postconfiguration: prepareServers,
};

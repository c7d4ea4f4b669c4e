/**
 * The stream `listen` directive (ngx_stream_core_listen): the address forms
 * nginx accepts for listening (`8080`, `*:8080`, `127.0.0.1:8080`,
 * `[::1]:8080`, `localhost:8080`, `unix:/path`) and its parameters, with
 * nginx's messages; and the local address form of `proxy_bind`.
 */
import net from 'node:net';
import type { ConfContext } from '../conf/context.ts';
import { parseNumber, parseSize, parseTime } from '../conf/values.ts';
import type { ListenSpec } from '../core/cycle.ts';
import { addressName, resolveHostSync } from '../upstream/address.ts';
import type { StreamListen } from './conf.ts';

/** Addresses of one `listen` argument: several when a host name resolves to several. */
function listenAddresses(cf: ConfContext, text: string): Array<{ host?: string; port?: number; path?: string }> {
  const fail = (err: string) => cf.error(`${err} in "${text}" of the "listen" directive`);
  if (text.slice(0, 5).toLowerCase() === 'unix:') {
    const path = text.slice(5);
    if (path === '') throw fail('no path in the unix domain socket');
    return [{ path }];
  }
  let host: string;
  let portText: string | undefined;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) throw fail('invalid host');
    host = text.slice(1, close);
    const rest = text.slice(close + 1);
    if (rest !== '') {
      if (rest[0] !== ':') throw fail('invalid host');
      portText = rest.slice(1);
    }
    if (!net.isIPv6(host)) throw fail('invalid IPv6 address');
  } else {
    if (text.includes('/') || text.includes('?')) throw fail('invalid host');
    const colon = text.indexOf(':');
    if (colon >= 0) {
      host = text.slice(0, colon);
      portText = text.slice(colon + 1);
    } else if (!Number.isNaN(parseNumber(text))) {
      host = '*';
      portText = text;
    } else {
      host = text;
    }
  }
  if (portText === undefined) throw fail('no port');
  const port = parseNumber(portText);
  if (!(port >= 1 && port <= 65535)) throw fail('invalid port');
  if (host === '') throw fail('no host');
  if (host === '*') return [{ host: '0.0.0.0', port }];
  const ips = resolveHostSync(host);
  if (ips.length === 0) throw fail('host not found');
  return ips.map((ip) => ({ host: ip, port }));
}

/** Parses `listen address [parameters]` into one StreamListen per address. */
export function parseStreamListen(cf: ConfContext, args: string[]): StreamListen[] {
  const base: Omit<StreamListen, 'spec' | 'addrText'> = { udp: false, ssl: false, proxyProtocol: false, defaultServer: false };
  const spec: Partial<ListenSpec> = {};
  let backlog = false;
  let keepalive = false;
  const invalid = (what: string, v: string) => cf.error(`invalid ${what} "${v}"`);
  for (const p of args.slice(1)) {
    if (p === 'udp') base.udp = true;
    else if (p === 'default_server') base.defaultServer = true;
    else if (p === 'bind' || p === 'reuseport') { /* every address is bound on its own, with SO_REUSEPORT */ }
    else if (p.startsWith('fastopen=')) {
      if (Number.isNaN(parseNumber(p.slice(9)))) throw invalid('fastopen', p);
    } else if (p.startsWith('backlog=')) {
      const n = parseNumber(p.slice(8));
      if (!(n > 0)) throw invalid('backlog', p);
      spec.backlog = n;
      backlog = true;
    } else if (p.startsWith('rcvbuf=') || p.startsWith('sndbuf=')) {
      if (Number.isNaN(parseSize(p.slice(7)))) throw invalid(p.slice(0, 6), p);
    } else if (p.startsWith('ipv6only=o')) {
      const v = p.slice(10);
      if (v !== 'n' && v !== 'ff') throw cf.error(`invalid ipv6only flags "${p.slice(9)}"`);
      spec.ipv6only = v === 'n';
    } else if (p === 'ssl') base.ssl = true;
    else if (p.startsWith('so_keepalive=')) {
      const v = p.slice(13);
      if (v === 'on' || v === 'off') spec.keepalive = v === 'on';
      else {
        // idle:interval:count; Node sets the idle time only
        const [idle, intvl, cnt] = v.split(':');
        const idleMs = idle ? parseTime(idle, true) * 1000 : 0;
        const bad = Number.isNaN(idleMs) || (intvl && Number.isNaN(parseTime(intvl, true))) || (cnt && Number.isNaN(parseNumber(cnt)));
        if (bad || (!idle && !intvl && !cnt)) throw cf.error(`invalid so_keepalive value: "${v}"`);
        spec.keepalive = true;
        if (idleMs) spec.keepaliveInitialDelayMs = idleMs;
      }
      keepalive = true;
    } else if (p === 'proxy_protocol') base.proxyProtocol = true;
    else throw cf.error(`the invalid "${p}" parameter`);
  }
  if (base.udp) {
    const clash = backlog ? 'backlog' : base.ssl ? 'ssl' : keepalive ? 'so_keepalive' : base.proxyProtocol ? 'proxy_protocol' : undefined;
    if (clash) throw cf.error(`"listen" directive "${clash}" parameter is incompatible with "udp"`);
  }
  return listenAddresses(cf, args[0]).map((a) => {
    const addrText = a.path !== undefined ? `unix:${a.path}` : addressName(a.host!, a.port!);
    if (base.udp && a.path !== undefined) throw cf.error('"listen" directive "udp" parameter on a unix socket is not supported by gatehouse yet');
    // a TCP and a UDP socket may share an address: the worker's listener key tells them apart
    const key = base.udp ? `udp:${addrText}` : addrText;
    return { ...base, spec: { ...spec, ...a, key, protocol: 'stream', udp: base.udp || undefined }, addrText };
  });
}

/** An address to connect from (proxy_bind). */
export interface LocalAddress {
  address: string;
  port?: number;
}

/** ngx_parse_addr_port: an IP address, with a port if given (`127.0.0.2`, `127.0.0.2:5000`, `[::1]:5000`). */
export function parseLocalAddress(text: string): LocalAddress | undefined {
  if (net.isIP(text)) return { address: text };
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(text) ?? /^([^:]+):(\d+)$/.exec(text);
  if (!m || !net.isIP(m[1])) return undefined;
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { address: m[1], port } : undefined;
}

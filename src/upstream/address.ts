/**
 * Upstream addresses: parsing `host:port`, `[v6]:port` and `unix:/path`
 * (nginx's ngx_parse_url for upstreams) and resolving names while the
 * configuration is read. Resolution is synchronous because configuration
 * loading is: /etc/hosts first (covers `localhost`), then the system
 * resolver through `getent`. As in ngx_inet_resolve_host, IPv4 addresses
 * come before IPv6 ones.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';

/** One socket address a peer connects to. */
export interface PeerAddress {
  /** As nginx prints it in `$upstream_addr` and logs: `127.0.0.1:8081`, `[::1]:80`, `unix:/tmp/s`. */
  name: string;
  host?: string;
  port?: number;
  /** Unix socket path. */
  path?: string;
}

/** A parsed `host[:port]` / `unix:path` before resolution. */
export interface ParsedUrl {
  /** Host as written, without port; the path for unix sockets. */
  host: string;
  port: number | undefined;
  /** `unix:` address. */
  unix: boolean;
  /** Text after the host part, starting with `/` or `?` (proxy_pass's URI), or ''. */
  uri: string;
  /** The host[:port] part as written (for `$proxy_host`). */
  hostPort: string;
}

/** Splits `host[:port][/uri]`, `[v6][:port][/uri]` or `unix:/path[:/uri]`. Returns an error text on failure. */
export function parseUrl(text: string, opts: { uriPart: boolean }): ParsedUrl | string {
  if (text.slice(0, 5).toLowerCase() === 'unix:') {
    const rest = text.slice(5);
    // proxy_pass http://unix:/path:/uri — the URI follows the second colon
    let path = rest;
    let uri = '';
    const colon = opts.uriPart ? rest.indexOf(':') : -1;
    if (colon >= 0) {
      path = rest.slice(0, colon);
      uri = rest.slice(colon + 1);
    }
    if (path === '') return 'no path in the unix domain socket';
    return { host: path, port: undefined, unix: true, uri, hostPort: 'unix:' + path };
  }
  let end = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '/' || c === '?') { end = i; break; }
  }
  const hostPort = text.slice(0, end);
  const uri = text.slice(end);
  if (uri && !opts.uriPart) return 'invalid host';
  let host: string;
  let port: number | undefined;
  if (hostPort.startsWith('[')) {
    const close = hostPort.indexOf(']');
    if (close < 0) return 'invalid IPv6 address';
    host = hostPort.slice(1, close);
    const after = hostPort.slice(close + 1);
    if (after !== '') {
      if (after[0] !== ':') return 'invalid host';
      const p = parsePort(after.slice(1));
      if (p === undefined) return 'invalid port';
      port = p;
    }
    if (!net.isIPv6(host)) return 'invalid IPv6 address';
  } else {
    const colon = hostPort.lastIndexOf(':');
    if (colon >= 0) {
      const p = parsePort(hostPort.slice(colon + 1));
      if (p === undefined) return 'invalid port';
      port = p;
      host = hostPort.slice(0, colon);
    } else {
      host = hostPort;
    }
  }
  if (host === '') return 'no host';
  return { host, port, unix: false, uri, hostPort };
}

function parsePort(s: string): number | undefined {
  if (!/^\d{1,5}$/.test(s)) return undefined;
  const n = Number(s);
  return n >= 1 && n <= 65535 ? n : undefined;
}

/** The address nginx prints for an IP and port. */
export function addressName(ip: string, port: number): string {
  return net.isIPv6(ip) ? `[${ip}]:${port}` : `${ip}:${port}`;
}

let hostsCache: Map<string, string[]> | undefined;

function hostsFile(): Map<string, string[]> {
  if (hostsCache) return hostsCache;
  hostsCache = new Map();
  let text = '';
  try { text = fs.readFileSync('/etc/hosts', 'latin1'); } catch { /* no hosts file */ }
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) continue;
    const [ip, ...names] = line.split(/\s+/);
    if (!net.isIP(ip)) continue;
    for (const n of names) {
      const key = n.toLowerCase();
      const list = hostsCache.get(key) ?? [];
      if (!list.includes(ip)) list.push(ip);
      hostsCache.set(key, list);
    }
  }
  return hostsCache;
}

/** IP addresses of `host` (an IP literal resolves to itself); IPv4 first. Empty when not found. */
export function resolveHostSync(host: string): string[] {
  if (net.isIP(host)) return [host];
  let ips = hostsFile().get(host.toLowerCase());
  if (!ips) {
    ips = [];
    try {
      const out = spawnSync('getent', ['ahosts', host], { encoding: 'latin1', timeout: 5000 });
      for (const line of (out.stdout ?? '').split('\n')) {
        const ip = line.split(/\s+/)[0];
        if (ip && net.isIP(ip) && !ips.includes(ip)) ips.push(ip);
      }
    } catch { /* no getent */ }
  }
  return [...ips.filter((ip) => net.isIPv4(ip)), ...ips.filter((ip) => net.isIPv6(ip))];
}

/** Resolves a parsed address into socket addresses; an error text when the host is unknown. */
export function resolveAddresses(u: ParsedUrl, defaultPort: number): PeerAddress[] | string {
  if (u.unix) return [{ name: 'unix:' + u.host, path: u.host }];
  const port = u.port ?? defaultPort;
  const ips = resolveHostSync(u.host);
  if (ips.length === 0) return 'host not found';
  return ips.map((ip) => ({ name: addressName(ip, port), host: ip, port }));
}

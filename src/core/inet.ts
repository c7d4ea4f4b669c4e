/**
 * Addresses written as text, read exactly as nginx reads them (ngx_inet.c):
 * `ngx_inet_addr` (IPv4, leading zeros allowed), `ngx_inet6_addr`,
 * `ngx_parse_addr[_port]`, `ngx_ptocidr`, and nginx's way of printing an
 * address (`ngx_sock_ntop`). Addresses are 4 (IPv4) or 16 (IPv6) bytes.
 * The rules of `allow`/`deny` (http and stream access) and the networks of
 * realip and geo are one shape, matched here. Also nginx's walk through X-Forwarded-For (ngx_http_get_forwarded_addr),
 * shared by geo `proxy` and realip.
 */
import net from 'node:net';
import type { ConfContext } from '../conf/context.ts';
import type { ConfNode } from '../conf/parser.ts';
import { mainErrorLog } from './error-log.ts';

/** ngx_inet_addr: `a.b.c.d`, each part up to 255; undefined where nginx gets INADDR_NONE. */
export function inetAddr(text: string): Uint8Array | undefined {
  const out = new Uint8Array(4);
  let octet = 0;
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) {
      octet = octet * 10 + (c - 0x30);
      if (octet > 255) return undefined;
    } else if (c === 0x2e) {
      if (n === 3) return undefined;
      out[n++] = octet;
      octet = 0;
    } else {
      return undefined;
    }
  }
  if (n !== 3) return undefined;
  out[3] = octet;
  // 255.255.255.255 is INADDR_NONE to nginx: never an address
  if (out[0] === 255 && out[1] === 255 && out[2] === 255 && out[3] === 255) return undefined;
  return out;
}

/** ngx_inet6_addr: IPv6 text (`::`, an IPv4 tail) into 16 bytes. */
export function inet6Addr(text: string): Uint8Array | undefined {
  if (text.length === 0) return undefined;
  const out = new Uint8Array(16);
  let p = 0;
  let len = text.length;
  let o = 0;
  let zero = -1;
  let digit = -1;
  let len4 = 0;
  let nibbles = 0;
  let word = 0;
  let n = 8;
  if (text[0] === ':') { p++; len--; }
  for (; len; len--) {
    const ch = text[p++];
    if (ch === ':') {
      if (nibbles) {
        digit = p;
        len4 = len;
        out[o++] = word >> 8;
        out[o++] = word & 0xff;
        if (--n) { nibbles = 0; word = 0; continue; }
      } else if (zero < 0) {
        digit = p;
        len4 = len;
        zero = o;
        continue;
      }
      return undefined;
    }
    if (ch === '.' && nibbles) {
      if (n < 2 || digit < 0) return undefined;
      // the IPv4 tail: everything after the last ':'
      const v4 = inetAddr(text.slice(digit, digit + len4 - 1));
      if (!v4) return undefined;
      out[o++] = v4[0];
      out[o++] = v4[1];
      word = (v4[2] << 8) | v4[3];
      n--;
      len = 0;
      break;
    }
    if (++nibbles > 4) return undefined;
    const c = ch.charCodeAt(0);
    if (c >= 0x30 && c <= 0x39) { word = word * 16 + (c - 0x30); continue; }
    const lc = c | 0x20;
    if (lc >= 0x61 && lc <= 0x66) { word = word * 16 + (lc - 0x61) + 10; continue; }
    return undefined;
  }
  if (nibbles === 0 && zero < 0) return undefined;
  out[o++] = word >> 8;
  out[o++] = word & 0xff;
  if (--n) {
    if (zero < 0) return undefined;
    // move what followed `::` to the end, zeros in between
    const tail = out.slice(zero, o);
    out.fill(0, zero);
    out.set(tail, 16 - tail.length);
    return out;
  }
  return zero < 0 ? out : undefined;
}

/** ngx_parse_addr: IPv4, else IPv6. */
export function parseAddr(text: string): Uint8Array | undefined {
  return inetAddr(text) ?? inet6Addr(text);
}

/** ngx_parse_addr_port: an address, `addr:port` or `[v6]:port` (port 1-65535). */
export function parseAddrPort(text: string): { addr: Uint8Array; port: number } | undefined {
  const plain = parseAddr(text);
  if (plain) return { addr: plain, port: 0 };
  let host: string;
  let portText: string;
  if (text[0] === '[') {
    const close = text.indexOf(']');
    if (close === text.length - 1) {
      const addr = parseAddr(text.slice(1, -1));
      return addr ? { addr, port: 0 } : undefined;
    }
    if (close < 0 || text[close + 1] !== ':') return undefined;
    host = text.slice(1, close);
    portText = text.slice(close + 2);
  } else {
    const colon = text.indexOf(':');
    if (colon < 0) return undefined;
    host = text.slice(0, colon);
    portText = text.slice(colon + 1);
  }
  if (!/^\d+$/.test(portText)) return undefined;
  const port = Number(portText);
  if (port < 1 || port > 65535) return undefined;
  const addr = parseAddr(host);
  return addr ? { addr, port } : undefined;
}

/** An access rule (`allow`/`deny`), also the shape of a network in realip, geo and stream. */
export interface Rule {
  deny: boolean;
  /** Which clients the rule applies to. */
  family: 4 | 6 | 'unix' | 'all';
  /** Network address and mask as 4 (IPv4) or 16 (IPv6) bytes. */
  addr?: Uint8Array;
  mask?: Uint8Array;
}

/** The bytes of an IPv4 or IPv6 address. */
export function addressBytes(ip: string): Uint8Array | undefined {
  if (net.isIPv4(ip)) return Uint8Array.from(ip.split('.').map(Number));
  if (!net.isIPv6(ip)) return undefined;
  let text = ip;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  let tail: number[] = [];
  if (v4) {
    tail = v4[1].split('.').map(Number);
    text = text.slice(0, -v4[1].length) + '0:0';
  }
  const [head, rest] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = rest !== undefined && rest !== '' ? rest.split(':') : [];
  const groups = rest === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  const out = new Uint8Array(16);
  groups.forEach((g, i) => { const n = parseInt(g, 16); out[i * 2] = n >> 8; out[i * 2 + 1] = n & 0xff; });
  if (v4) out.set(tail, 12);
  return out;
}

function maskBytes(bits: number, len: number): Uint8Array {
  const m = new Uint8Array(len);
  for (let i = 0; i < len; i++) {
    const b = Math.max(0, Math.min(8, bits - i * 8));
    m[i] = b === 0 ? 0 : (0xff << (8 - b)) & 0xff;
  }
  return m;
}

/** Parses `addr[/bits]` (ngx_ptocidr); warns about host bits as nginx does. */
export function parseRule(cf: ConfContext, node: ConfNode, deny: boolean): Rule {
  const value = node.args[0];
  if (value === 'all') return { deny, family: 'all' };
  if (value === 'unix:') return { deny, family: 'unix' };
  const slash = value.indexOf('/');
  const ip = slash >= 0 ? value.slice(0, slash) : value;
  const addr = addressBytes(ip);
  const bitsText = slash >= 0 ? value.slice(slash + 1) : undefined;
  const maxBits = addr ? addr.length * 8 : 0;
  const bits = bitsText === undefined ? maxBits : /^\d+$/.test(bitsText) ? Number(bitsText) : NaN;
  if (!addr || !(bits >= 0 && bits <= maxBits)) throw cf.error(`invalid parameter "${value}"`);
  const mask = maskBytes(bits, addr.length);
  let hostBits = false;
  for (let i = 0; i < addr.length; i++) {
    if (addr[i] & ~mask[i]) hostBits = true;
    addr[i] &= mask[i];
  }
  if (hostBits) mainErrorLog().warn(`low address bits of ${value} are meaningless in ${node.file}:${node.line}`);
  return { deny, family: addr.length === 4 ? 4 : 6, addr, mask };
}

export function matches(rule: Rule, family: 4 | 6 | 'unix', addr: Uint8Array | undefined): boolean {
  if (rule.family === 'all') return true;
  if (rule.family !== family) return false;
  if (family === 'unix') return true;
  const a = addr!;
  const net = rule.addr!;
  const mask = rule.mask!;
  for (let i = 0; i < net.length; i++) if ((a[i] & mask[i]) !== net[i]) return false;
  return true;
}

/** A network (ngx_cidr_t) in the shape access rules use, so `matches` applies. */
export interface Cidr extends Rule {
  family: 4 | 6;
  addr: Uint8Array;
  mask: Uint8Array;
  /** The address had bits outside the mask (nginx warns "low address bits ... are meaningless"). */
  hostBits: boolean;
}

/** ngx_ptocidr: `addr` or `addr/bits`; undefined where nginx says the network is invalid. */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const ipText = slash >= 0 ? text.slice(0, slash) : text;
  const v4 = inetAddr(ipText);
  const addr = v4 ?? inet6Addr(ipText);
  if (!addr) return undefined;
  const family = v4 ? 4 : 6;
  const width = addr.length * 8;
  let bits = width;
  if (slash >= 0) {
    const b = text.slice(slash + 1);
    if (!/^\d+$/.test(b)) return undefined;
    bits = Number(b);
    if (bits > width) return undefined;
  }
  const mask = new Uint8Array(addr.length);
  let hostBits = false;
  for (let i = 0; i < addr.length; i++) {
    const s = Math.max(0, Math.min(8, bits - i * 8));
    mask[i] = (0xff << (8 - s)) & 0xff;
    if (addr[i] & ~mask[i]) hostBits = true;
    addr[i] &= mask[i];
  }
  return { deny: false, family, addr, mask, hostBits };
}

/** Whether 16 bytes are an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`). */
export function isV4Mapped(a: Uint8Array): boolean {
  if (a.length !== 16) return false;
  for (let i = 0; i < 10; i++) if (a[i] !== 0) return false;
  return a[10] === 0xff && a[11] === 0xff;
}

/** nginx's text of an address (ngx_sock_ntop without port: ngx_inet6_ntop for IPv6). */
export function addrText(a: Uint8Array): string {
  if (a.length === 4) return `${a[0]}.${a[1]}.${a[2]}.${a[3]}`;
  // the longest run of zero words (two or more) becomes `::`
  let zero = -1;
  let max = 1;
  let last = -1;
  let n = 0;
  for (let i = 0; i < 16; i += 2) {
    if (a[i] || a[i + 1]) {
      if (max < n) { zero = last; max = n; }
      n = 0;
      continue;
    }
    if (n++ === 0) last = i;
  }
  if (max < n) { zero = last; max = n; }
  let out = '';
  let end = 16;
  if (zero === 0) {
    if ((max === 5 && a[10] === 0xff && a[11] === 0xff) || max === 6 || (max === 7 && a[14] !== 0 && a[15] !== 1)) end = 12;
    out += ':';
  }
  for (let i = 0; i < end; i += 2) {
    if (i === zero) {
      out += ':';
      i += (max - 1) * 2;
      continue;
    }
    out += ((a[i] << 8) | a[i + 1]).toString(16);
    if (i < 14) out += ':';
  }
  if (end === 12) out += `${a[12]}.${a[13]}.${a[14]}.${a[15]}`;
  return out;
}

/** A client address as nginx holds it: the bytes (none for a unix socket) and the port. */
export interface ClientAddr {
  addr: Uint8Array | undefined;
  port: number;
}

/** Whether `client` is in one of `nets` (ngx_cidr_match: a v4-mapped address is IPv4; `unix:` rules match unix clients). */
export function cidrMatch(client: ClientAddr, nets: readonly Rule[]): boolean {
  let a = client.addr;
  let family: 4 | 6 | 'unix';
  if (!a) family = 'unix';
  else if (isV4Mapped(a)) { a = a.subarray(12); family = 4; }
  else family = a.length === 4 ? 4 : 6;
  for (const net of nets) if (matches(net, family, a)) return true;
  return false;
}

/** ngx_http_get_forwarded_addr_internal's result: DECLINED (no change), OK, or DONE (stopped at an untrusted hop). */
export const FWD_DECLINED = 0;
export const FWD_OK = 1;
export const FWD_DONE = 2;

/**
 * ngx_http_get_forwarded_addr over one header value: while the current
 * address is a trusted proxy, take the last address of the list (only one
 * step unless `recursive`). Updates `client` in place.
 */
function forwardedOne(client: ClientAddr, value: string, proxies: readonly Rule[], recursive: boolean): number {
  let found = false;
  let len = value.length;
  let p: number;
  do {
    if (!cidrMatch(client, proxies)) return found ? FWD_DONE : FWD_DECLINED;
    // skip trailing separators, then find the start of the last item
    p = len - 1;
    while (p > 0 && (value[p] === ' ' || value[p] === ',')) { p--; len--; }
    while (p > 0) {
      if (value[p] === ' ' || value[p] === ',') { p++; break; }
      p--;
    }
    const parsed = parseAddrPort(value.slice(p, len));
    if (!parsed) return found ? FWD_DONE : FWD_DECLINED;
    client.addr = parsed.addr;
    client.port = parsed.port;
    found = true;
    len = p - 1;
  } while (recursive && p > 0);
  return FWD_OK;
}

/**
 * ngx_http_get_forwarded_addr over several headers of the name (the last
 * header first), or one value when `values` has one item.
 */
export function forwardedAddr(client: ClientAddr, values: readonly string[], proxies: readonly Rule[], recursive: boolean): number {
  let rc = FWD_DECLINED;
  let found = false;
  for (let i = values.length - 1; i >= 0; i--) {
    rc = forwardedOne(client, values[i], proxies, recursive);
    if (!recursive) break;
    if (rc === FWD_DECLINED && found) return FWD_DONE;
    if (rc !== FWD_OK) break;
    found = true;
  }
  return rc;
}

/** The client address of a connection's address text (`unix:` and anything unparsable have no bytes). */
export function clientAddrOf(text: string, port: number): ClientAddr {
  return { addr: text.startsWith('unix:') ? undefined : parseAddr(text), port };
}

/**
 * One `set_real_ip_from` value (http and stream realip) onto `list`:
 * `unix:`, a network, or a host name whose addresses `resolve` finds now
 * (ngx_inet_resolve_host), with nginx's messages.
 */
export function addTrustedFrom(cf: ConfContext, value: string, list: Rule[], resolve: (host: string) => string[]): void {
  if (value === 'unix:') {
    list.push({ deny: false, family: 'unix' });
    return;
  }
  const cidr = parseCidr(value);
  if (cidr) {
    if (cidr.hostBits) cf.warn(`low address bits of ${value} are meaningless`);
    list.push(cidr);
    return;
  }
  const ips = resolve(value);
  if (ips.length === 0) throw cf.error(`host not found in set_real_ip_from "${value}"`);
  for (const ip of ips) {
    const addr = parseAddr(ip);
    if (addr) list.push({ deny: false, family: addr.length === 4 ? 4 : 6, addr, mask: new Uint8Array(addr.length).fill(0xff) });
  }
}

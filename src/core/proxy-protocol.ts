/**
 * Reading the PROXY protocol header a load balancer sends first on
 * `listen … proxy_protocol` (ngx_proxy_protocol_read, versions 1 and 2):
 * the client's and the balancer's addresses for `$proxy_protocol_addr`,
 * `$proxy_protocol_port`, `$proxy_protocol_server_addr` and
 * `$proxy_protocol_server_port`, and a v2 header's TLVs
 * (`$proxy_protocol_tlv_*`). As in nginx, a v1 line must fit in 107 bytes
 * and a v2 header in 4096; bytes after it stay in the socket for the
 * session. Also the v1 line `proxy_protocol on` sends to upstreams.
 */
import net from 'node:net';
import type { Socket } from 'node:net';
import type { ListenSpec } from './cycle.ts';

export interface ProxyProtocolInfo {
  srcAddr: string;
  srcPort: number;
  dstAddr: string;
  dstPort: number;
  /** A v2 header's TLVs after the addresses, as sent. */
  tlvs?: Buffer;
}

/** nginx's NGX_PROXY_PROTOCOL_V1_MAX_HEADER and NGX_PROXY_PROTOCOL_MAX_HEADER. */
const V1_MAX_HEADER = 107;
const MAX_HEADER = 4096;
const V2_SIGNATURE = Buffer.from('\r\n\r\n\0\r\nQUIT\n', 'latin1');

/** What a complete header gave: the addresses (undefined for UNKNOWN / LOCAL), and its length. */
type Parsed = { info: ProxyProtocolInfo | undefined; length: number } | { error: string };

/**
 * Whether `buf` starts as no v1 line can (`PROXY INVALID`): nginx parses
 * what one read brings and fails at once, so a broken start is not waited on.
 */
function impossibleStart(buf: Buffer): boolean {
  const sig = Math.min(buf.length, V2_SIGNATURE.length);
  if (buf.subarray(0, sig).equals(V2_SIGNATURE.subarray(0, sig))) return false;
  const text = buf.subarray(0, 13).toString('latin1');
  const n = Math.min(text.length, 6);
  if (text.slice(0, n) !== 'PROXY '.slice(0, n)) return true;
  const rest = text.slice(6);
  return !['TCP4 ', 'TCP6 ', 'UNKNOWN'].some((p) => {
    const k = Math.min(p.length, rest.length);
    return p.slice(0, k) === rest.slice(0, k);
  });
}

/** Whether `buf` holds a whole header yet (or can never hold one within the limit). */
export function proxyHeaderComplete(buf: Buffer): boolean {
  if (buf.length >= 16 && buf.subarray(0, 12).equals(V2_SIGNATURE)) return buf.length >= Math.min(MAX_HEADER, 16 + buf.readUInt16BE(14));
  if (buf.length >= V1_MAX_HEADER || impossibleStart(buf)) return true;
  return buf.indexOf('\n') >= 0;
}

function readPort(text: string): number {
  return /^\d{1,5}$/.test(text) && Number(text) <= 65535 ? Number(text) : NaN;
}

/** Parses a header at the start of `buf` (at most 107 bytes of a v1 line, 4096 of a v2 header, are looked at). */
export function parseProxyProtocol(data: Buffer): Parsed {
  if (data.length >= 16 && data.subarray(0, 12).equals(V2_SIGNATURE)) return parseV2(data.subarray(0, MAX_HEADER));
  const buf = data.subarray(0, V1_MAX_HEADER);
  const broken = { error: `broken header: "${buf.toString('latin1')}"` };
  const text = buf.toString('latin1');
  if (buf.length < 8 || !text.startsWith('PROXY ')) return broken;
  if (text.startsWith('UNKNOWN', 6)) {
    const crlf = text.indexOf('\r\n', 13);
    return crlf < 0 ? broken : { info: undefined, length: crlf + 2 };
  }
  const m = /^PROXY TCP[46] ([0-9A-Fa-f:.]+) ([0-9A-Fa-f:.]+) ([^ ]*) ([^\r]*)\r\n/.exec(text);
  if (!m) return broken;
  const srcPort = readPort(m[3]);
  const dstPort = readPort(m[4]);
  if (Number.isNaN(srcPort) || Number.isNaN(dstPort)) return broken;
  return { info: { srcAddr: m[1], srcPort, dstAddr: m[2], dstPort }, length: m[0].length };
}

function parseV2(buf: Buffer): Parsed {
  const version = buf[12] >> 4;
  if (version !== 2) return { error: `unknown PROXY protocol version: ${version}` };
  const len = buf.readUInt16BE(14);
  if (buf.length - 16 < len) return { error: 'header is too large' };
  const length = 16 + len;
  // only PROXY over STREAM with IPv4 or IPv6 addresses carries addresses; the rest is skipped
  if ((buf[12] & 0x0f) !== 1 || (buf[13] & 0x0f) !== 1) return { info: undefined, length };
  const family = buf[13] >> 4;
  const body = buf.subarray(16, length);
  if (family === 1) {
    if (body.length < 12) return { error: 'header is too large' };
    const ip = (o: number) => `${body[o]}.${body[o + 1]}.${body[o + 2]}.${body[o + 3]}`;
    return { info: { srcAddr: ip(0), dstAddr: ip(4), srcPort: body.readUInt16BE(8), dstPort: body.readUInt16BE(10), tlvs: body.subarray(12) }, length };
  }
  if (family === 2) {
    if (body.length < 36) return { error: 'header is too large' };
    const ip = (o: number) => ipv6Text(body.subarray(o, o + 16));
    return { info: { srcAddr: ip(0), dstAddr: ip(16), srcPort: body.readUInt16BE(32), dstPort: body.readUInt16BE(34), tlvs: body.subarray(36) }, length };
  }
  return { info: undefined, length };
}

/** An IPv6 address as inet_ntop prints it (compressed, IPv4-mapped as dotted). */
function ipv6Text(b: Buffer): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(b.readUInt16BE(i).toString(16));
  return new net.SocketAddress({ address: groups.join(':'), family: 'ipv6' }).address;
}

/**
 * Reads the header from `socket`, then leaves the rest of the data in it.
 * Resolves with the header's addresses, `undefined` when it carries none,
 * or an error text; `timeoutMs` ends the wait with 'timeout'.
 */
export function readProxyProtocol(socket: Socket, timeoutMs: number): Promise<ProxyProtocolInfo | undefined | { error: string } | 'timeout' | 'closed'> {
  return new Promise((resolve) => {
    let buf: Buffer = Buffer.alloc(0);
    const done = (result: ProxyProtocolInfo | undefined | { error: string } | 'timeout' | 'closed', rest?: Buffer) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.pause();
      if (rest && rest.length) socket.unshift(rest);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      if (!proxyHeaderComplete(buf)) return;
      const r = parseProxyProtocol(buf);
      if ('error' in r) done(r);
      else done(r.info, buf.subarray(r.length));
    };
    // a whole header would have been taken by now: what is left is broken
    const onEnd = () => done(buf.length ? { error: `broken header: "${buf.subarray(0, V1_MAX_HEADER).toString('latin1')}"` } : 'closed');
    const timer = setTimeout(() => done('timeout'), timeoutMs);
    socket.on('data', onData);
    socket.on('end', onEnd);
  });
}

/** The connection a v1 line describes (a stream session): its two ends, and the listener it came in on. */
export interface ProxiedConnection {
  readonly listen: { readonly spec: ListenSpec };
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly localAddress: string;
  readonly localPort: number;
}

/** The PROXY protocol v1 line nginx sends first with `proxy_protocol on` (ngx_proxy_protocol_write). */
export function proxyProtocolHeader(s: ProxiedConnection): string {
  if (s.listen.spec.path !== undefined) return 'PROXY UNKNOWN\r\n';
  const v6 = s.remoteAddress.includes(':');
  return `PROXY TCP${v6 ? 6 : 4} ${s.remoteAddress} ${s.localAddress} ${s.remotePort} ${s.localPort}\r\n`;
}

/** TLV names nginx knows (ngx_proxy_protocol_tlv_entries), and those inside the SSL TLV. */
const TLV_TYPES: Record<string, number> = { alpn: 0x01, authority: 0x02, unique_id: 0x05, ssl: 0x20, netns: 0x30 };
const SSL_TLV_TYPES: Record<string, number> = { version: 0x21, cn: 0x22, cipher: 0x23, sig_alg: 0x24, key_alg: 0x25 };

/** The value of the first TLV of `type` in `tlvs`; undefined when there is none or the list is broken. */
function findTlv(tlvs: Buffer, type: number): Buffer | undefined {
  for (let p = 0; p + 3 <= tlvs.length;) {
    const len = tlvs.readUInt16BE(p + 1);
    if (p + 3 + len > tlvs.length) return undefined;
    if (tlvs[p] === type) return tlvs.subarray(p + 3, p + 3 + len);
    p += 3 + len;
  }
  return undefined;
}

/**
 * `$proxy_protocol_tlv_NAME` (ngx_proxy_protocol_get_tlv): `alpn`,
 * `authority`, `unique_id`, `ssl`, `netns`, `0xHH` for any type, and
 * `ssl_verify`, `ssl_version`, `ssl_cn`, `ssl_cipher`, `ssl_sig_alg`,
 * `ssl_key_alg`, `ssl_0xHH` inside the SSL TLV; latin1 text.
 */
export function proxyProtocolTlv(info: ProxyProtocolInfo, name: string): string | undefined {
  let tlvs = info.tlvs;
  if (!tlvs) return undefined;
  let types = TLV_TYPES;
  let n = name;
  if (n.startsWith('ssl_')) {
    const ssl = findTlv(tlvs, 0x20);
    // client (1 byte) and verify (4 bytes) come before the sub-TLVs
    if (!ssl || ssl.length < 5) return undefined;
    n = n.slice(4);
    if (n === 'verify') return String(ssl.readUInt32BE(1));
    tlvs = ssl.subarray(5);
    types = SSL_TLV_TYPES;
  }
  let type: number | undefined;
  if (n.startsWith('0x')) type = /^[0-9a-fA-F]+$/.test(n.slice(2)) ? parseInt(n.slice(2), 16) : undefined;
  else type = Object.hasOwn(types, n) ? types[n] : undefined;
  if (type === undefined) return undefined;
  return findTlv(tlvs, type)?.toString('latin1');
}

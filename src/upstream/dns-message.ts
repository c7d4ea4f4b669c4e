/**
 * DNS wire format for the resolver: building A/AAAA/SRV queries and reading
 * answers and names, as nginx's ngx_resolver.c does (names lowercased, compression
 * pointers followed at most 128 times).
 */
import net from 'node:net';

export const TYPE_A = 1;
export const TYPE_CNAME = 5;
export const TYPE_AAAA = 28;
export const TYPE_SRV = 33;
export const TYPE_DNAME = 39;

const RCODE_TEXT = ['', 'Format error', 'Server failure', 'Host not found', 'Unimplemented', 'Operation refused'];

/** nginx's ngx_resolver_strerror(). */
export function dnsErrorText(code: number): string {
  if (code > 0 && code < 6) return RCODE_TEXT[code];
  if (code === 110) return 'Operation timed out';
  return 'Unknown error';
}

/**
 * A recursive query for `name` (already lowercased), or undefined where
 * nginx declines to ask (an empty name or label, or a label over 255
 * bytes) and answers "Host not found" itself.
 */
export function encodeQuery(id: number, name: string, qtype: number): Buffer | undefined {
  if (name === '') return undefined;
  const labels = name.split('.');
  let len = 12 + 1 + 4;
  for (const l of labels) {
    if (l.length === 0 || l.length > 255) return undefined;
    len += 1 + l.length;
  }
  const b = Buffer.alloc(len);
  b.writeUInt16BE(id, 0);
  b[2] = 1; // recursion desired
  b[5] = 1; // one question
  let o = 12;
  for (const l of labels) {
    b[o++] = l.length;
    o += b.write(l, o, 'latin1');
  }
  b[o++] = 0;
  b.writeUInt16BE(qtype, o);
  b.writeUInt16BE(1, o + 2);
  return b;
}

/** The name at `off` (following compression), lowercased, or the error text nginx logs. */
export function readName(buf: Buffer, off: number): { name: string } | { error: string } {
  const last = buf.length;
  let p = off;
  const labels: string[] = [];
  for (let i = 0; i < 128; i++) {
    if (p >= last) return { error: 'name is out of DNS response' };
    const n = buf[p++];
    if (n === 0) return { name: labels.join('.') };
    if (n & 0xc0) {
      if ((n & 0xc0) !== 0xc0) return { error: 'invalid label type in DNS response' };
      if (p >= last) return { error: 'name is out of DNS response' };
      p = ((n & 0x3f) << 8) + buf[p];
    } else {
      if (p + n > last) return { error: 'name is out of DNS response' };
      labels.push(buf.toString('latin1', p, p + n).toLowerCase());
      p += n;
    }
    if (p >= last) return { error: 'name is out of DNS response' };
  }
  return { error: 'compression pointers loop in DNS response' };
}

export function ipv4At(b: Buffer, o: number): string {
  return `${b[o]}.${b[o + 1]}.${b[o + 2]}.${b[o + 3]}`;
}

/** The canonical (compressed) text of the IPv6 address at `o`, as nginx prints it. */
export function ipv6At(b: Buffer, o: number): string {
  const parts: string[] = [];
  for (let k = 0; k < 16; k += 2) parts.push(b.readUInt16BE(o + k).toString(16));
  return new net.SocketAddress({ address: parts.join(':'), family: 'ipv6' }).address;
}

/** One SRV record (a weight of 0 counts as 1, as in nginx). */
export interface SrvRecord {
  priority: number;
  weight: number;
  port: number;
  name: string;
}

export interface Answers {
  /** Addresses of the asked type, in answer order. */
  addrs: string[];
  /** SRV records, for an SRV query. */
  srvs: SrvRecord[];
  /** Offset of the last CNAME's target name, or -1. */
  cname: number;
  /** The smallest TTL of all records (seconds). */
  ttl: number;
}

/**
 * The answer section of a response to an A or AAAA query, checked as
 * ngx_resolver_process_a checks it; `{ error }` is nginx's text for an
 * answer to ignore. Records of other types are logged and skipped.
 */
export function readAnswers(buf: Buffer, start: number, count: number, qtype: number, warn: (msg: string) => void): Answers | { error: string } {
  const addrs: string[] = [];
  const srvs: SrvRecord[] = [];
  let cname = -1;
  let ttlMin = 0xffffffff;
  let i = start;
  const n = buf.length;
  for (let a = 0; a < count; a++) {
    const from = i;
    for (;;) {
      if (i >= n) return { error: 'short DNS response' };
      if (buf[i] & 0xc0) { i += 2; break; }
      if (buf[i] === 0) {
        i++;
        if (i - from < 2) return { error: 'invalid name in DNS response' };
        break;
      }
      i += 1 + buf[i];
    }
    if (i + 10 >= n) return { error: 'short DNS response' };
    const type = buf.readUInt16BE(i);
    const cls = buf.readUInt16BE(i + 2);
    const ttl = Math.max(0, buf.readInt32BE(i + 4));
    const len = buf.readUInt16BE(i + 8);
    if (cls !== 1) return { error: `unexpected RR class ${cls} in DNS response` };
    ttlMin = Math.min(ttlMin, ttl);
    i += 10;
    if (type === TYPE_SRV && qtype === TYPE_SRV) {
      if (i + 6 > n) return { error: 'short DNS response' };
      const target = readName(buf, i + 6);
      if ('error' in target) return target;
      srvs.push({ priority: buf.readUInt16BE(i), weight: buf.readUInt16BE(i + 2) || 1, port: buf.readUInt16BE(i + 4), name: target.name });
    } else if ((type === TYPE_A || type === TYPE_AAAA) && qtype !== TYPE_SRV) {
      const name = type === TYPE_A ? 'A' : 'AAAA';
      if (type !== qtype) return { error: `unexpected ${name} record in DNS response` };
      const size = type === TYPE_A ? 4 : 16;
      if (len !== size) return { error: `invalid ${name} record in DNS response` };
      if (i + size > n) return { error: 'short DNS response' };
      addrs.push(type === TYPE_A ? ipv4At(buf, i) : ipv6At(buf, i));
    } else if (type === TYPE_CNAME) {
      cname = i;
    } else if (type !== TYPE_DNAME) {
      warn(`unexpected RR type ${type} in DNS response`);
    }
    i += len;
  }
  return { addrs, srvs, cname, ttl: ttlMin };
}

export interface ResponseHeader {
  ident: number;
  /** The response code: 1 (format error) is for the caller to report with the query's name. */
  code: number;
  qtype: number;
  /** Answer records, and where they start. */
  nan: number;
  answers: number;
  trunc: boolean;
}

/**
 * The header and question of a response, checked as
 * ngx_resolver_process_response checks them; `{ error }` is nginx's text
 * for a response to ignore.
 */
export function readHeader(buf: Buffer, tcp: boolean): ResponseHeader | { error: string } {
  if (buf.length < 12) return { error: 'short DNS response' };
  const ident = buf.readUInt16BE(0);
  const flags = buf.readUInt16BE(2);
  const nqs = buf.readUInt16BE(4);
  const nan = buf.readUInt16BE(6);
  const trunc = (flags & 0x0200) !== 0;
  if ((flags & 0xf870) !== 0x8000 || (trunc && tcp)) {
    return { error: `invalid ${tcp ? 'TCP' : 'UDP'} DNS response ${ident} fl:${flags.toString(16).toUpperCase().padStart(4, '0')}` };
  }
  const code = flags & 0xf;
  if (code === 1) return { ident, code, qtype: 0, nan, answers: 0, trunc };
  if (code > 5) return { error: `DNS error (${code}: ${dnsErrorText(code)}), query id:${ident}` };
  if (nqs !== 1) return { error: 'invalid number of questions in DNS response' };
  let i = 12;
  for (;;) {
    if (i >= buf.length) return { error: 'short DNS response' };
    if (buf[i] & 0xc0) return { error: 'unexpected compression pointer in DNS response' };
    if (buf[i] === 0) break;
    i += 1 + buf[i];
  }
  if (i++ === 12) return { error: 'zero-length domain name in DNS response' };
  if (i + 4 + nan * 12 > buf.length) return { error: 'short DNS response' };
  const qtype = buf.readUInt16BE(i);
  const qclass = buf.readUInt16BE(i + 2);
  if (qclass !== 1) return { error: `unknown query class ${qclass} in DNS response` };
  if (qtype !== TYPE_A && qtype !== TYPE_AAAA && qtype !== TYPE_SRV) return { error: `unknown query type ${qtype} in DNS response` };
  return { ident, code, qtype, nan, answers: i + 4, trunc };
}

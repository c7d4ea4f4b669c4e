/**
 * A small DNS client (nginx's ngx_resolver): A and AAAA queries over UDP to
 * the configured `resolver` addresses, answers cached for their TTL or the
 * `valid=` time, several lookups of one name sharing one query. Used for
 * proxy_pass targets built from variables.
 */
import dgram from 'node:dgram';
import net from 'node:net';

export interface ResolverConf {
  servers: { host: string; port: number }[];
  /** `valid=` in ms, overriding answer TTLs. */
  validMs?: number;
  ipv4: boolean;
  ipv6: boolean;
}

/** A failed lookup, with nginx's code and text (`(3: Host not found)`). */
export class ResolveError extends Error {
  readonly code: number;
  constructor(code: number, text: string) {
    super(text);
    this.code = code;
  }
}

const RCODE_TEXT = ['', 'Format error', 'Server failure', 'Host not found', 'Unimplemented', 'Operation refused'];

interface CacheEntry {
  addrs: string[];
  error?: ResolveError;
  expires: number;
}

interface Pending {
  name: string;
  waiters: { resolve(a: string[]): void; reject(e: ResolveError): void }[];
  /** Answers still expected (A and/or AAAA), and what came so far. */
  left: number;
  v4: string[];
  v6: string[];
  rcode: number;
  ttl: number;
  timer: NodeJS.Timeout;
  ids: number[];
}

function encodeQuery(id: number, name: string, qtype: number): Buffer {
  const labels = name.replace(/\.$/, '').split('.');
  let len = 12 + 5;
  for (const l of labels) len += 1 + l.length;
  const b = Buffer.alloc(len);
  b.writeUInt16BE(id, 0);
  b.writeUInt16BE(0x0100, 2); // recursion desired
  b.writeUInt16BE(1, 4);
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

/** Skips a (possibly compressed) domain name; returns the offset after it. */
function skipName(b: Buffer, o: number): number {
  while (o < b.length) {
    const n = b[o];
    if (n === 0) return o + 1;
    if ((n & 0xc0) === 0xc0) return o + 2;
    o += n + 1;
  }
  return -1;
}

interface Answer { id: number; rcode: number; addrs: string[]; ttl: number; qtype: number }

function decodeAnswer(b: Buffer): Answer | undefined {
  if (b.length < 12) return undefined;
  const id = b.readUInt16BE(0);
  const flags = b.readUInt16BE(2);
  if (!(flags & 0x8000)) return undefined;
  const rcode = flags & 0x0f;
  const qd = b.readUInt16BE(4);
  const an = b.readUInt16BE(6);
  let o = 12;
  let qtype = 0;
  for (let i = 0; i < qd; i++) {
    o = skipName(b, o);
    if (o < 0 || o + 4 > b.length) return undefined;
    qtype = b.readUInt16BE(o);
    o += 4;
  }
  const addrs: string[] = [];
  let ttl = Infinity;
  for (let i = 0; i < an; i++) {
    o = skipName(b, o);
    if (o < 0 || o + 10 > b.length) break;
    const type = b.readUInt16BE(o);
    const rttl = b.readUInt32BE(o + 4);
    const rdlen = b.readUInt16BE(o + 8);
    o += 10;
    if (o + rdlen > b.length) break;
    if (type === 1 && rdlen === 4) {
      addrs.push(`${b[o]}.${b[o + 1]}.${b[o + 2]}.${b[o + 3]}`);
      ttl = Math.min(ttl, rttl);
    } else if (type === 28 && rdlen === 16) {
      const parts: string[] = [];
      for (let k = 0; k < 16; k += 2) parts.push(b.readUInt16BE(o + k).toString(16));
      // the canonical (compressed) form, as nginx prints addresses
      addrs.push(new net.SocketAddress({ address: parts.join(':'), family: 'ipv6' }).address);
      ttl = Math.min(ttl, rttl);
    }
    o += rdlen;
  }
  return { id, rcode, addrs, ttl: ttl === Infinity ? 0 : ttl, qtype };
}

export class Resolver {
  readonly conf: ResolverConf;
  readonly timeoutMs: number;
  private socket: dgram.Socket | undefined;
  private readonly cache = new Map<string, CacheEntry>();
  private readonly pending = new Map<string, Pending>();
  private readonly byId = new Map<number, Pending>();
  private nextServer = 0;
  private nextId = Math.floor(Math.random() * 0xffff);

  constructor(conf: ResolverConf, timeoutMs: number) {
    this.conf = conf;
    this.timeoutMs = timeoutMs;
  }

  /** Addresses of `name` (IPv4 first), or a ResolveError. */
  resolve(name: string): Promise<string[]> {
    const key = name.toLowerCase();
    const hit = this.cache.get(key);
    if (hit && hit.expires > Date.now()) return hit.error ? Promise.reject(hit.error) : Promise.resolve(hit.addrs);
    return new Promise((resolve, reject) => {
      let p = this.pending.get(key);
      if (!p) p = this.query(key);
      p.waiters.push({ resolve, reject });
    });
  }

  close(): void {
    this.socket?.close();
    this.socket = undefined;
    for (const p of this.pending.values()) clearTimeout(p.timer);
  }

  private udp(): dgram.Socket {
    if (this.socket) return this.socket;
    const first = this.conf.servers[0];
    const s = dgram.createSocket(net.isIPv6(first.host) ? 'udp6' : 'udp4');
    s.on('message', (msg) => this.onMessage(msg));
    s.on('error', () => { /* a lost answer ends in a timeout */ });
    s.unref();
    this.socket = s;
    return s;
  }

  private query(name: string): Pending {
    const types: number[] = [];
    if (this.conf.ipv4) types.push(1);
    if (this.conf.ipv6) types.push(28);
    const p: Pending = {
      name, waiters: [], left: types.length, v4: [], v6: [], rcode: 0, ttl: Infinity, ids: [],
      timer: setTimeout(() => this.finish(p, new ResolveError(110, 'Operation timed out'), false), this.timeoutMs),
    };
    this.pending.set(name, p);
    const server = this.conf.servers[this.nextServer++ % this.conf.servers.length];
    for (const t of types) {
      const id = (this.nextId = (this.nextId + 1) & 0xffff);
      p.ids.push(id);
      this.byId.set(id, p);
      this.udp().send(encodeQuery(id, name, t), server.port, server.host);
    }
    return p;
  }

  private onMessage(msg: Buffer): void {
    const a = decodeAnswer(msg);
    if (!a) return;
    const p = this.byId.get(a.id);
    if (!p) return;
    this.byId.delete(a.id);
    if (a.rcode) p.rcode ||= a.rcode;
    for (const ip of a.addrs) (net.isIPv4(ip) ? p.v4 : p.v6).push(ip);
    if (a.addrs.length) p.ttl = Math.min(p.ttl, a.ttl);
    if (--p.left > 0) return;
    const addrs = [...p.v4, ...p.v6];
    if (addrs.length) this.finish(p, addrs, true);
    else {
      const code = p.rcode || 3;
      this.finish(p, new ResolveError(code, RCODE_TEXT[code] ?? 'Unknown error'), true);
    }
  }

  private finish(p: Pending, result: string[] | ResolveError, cache: boolean): void {
    clearTimeout(p.timer);
    this.pending.delete(p.name);
    for (const id of p.ids) this.byId.delete(id);
    if (cache) {
      const ttlMs = this.conf.validMs ?? (p.ttl === Infinity ? 30_000 : p.ttl * 1000);
      this.cache.set(p.name, {
        addrs: Array.isArray(result) ? result : [],
        error: Array.isArray(result) ? undefined : result,
        expires: Date.now() + ttlMs,
      });
    }
    for (const w of p.waiters) {
      if (Array.isArray(result)) w.resolve(result);
      else w.reject(result);
    }
  }
}

/** Parses `resolver` arguments: `127.0.0.1[:53] [::1] valid=30s ipv6=off`. */
export function parseResolverArgs(args: string[], parseTimeMs: (s: string) => number): ResolverConf | string {
  const conf: ResolverConf = { servers: [], ipv4: true, ipv6: true };
  for (const a of args) {
    if (a.startsWith('valid=')) {
      const ms = parseTimeMs(a.slice(6));
      if (Number.isNaN(ms)) return `invalid parameter "${a}"`;
      conf.validMs = ms;
    } else if (a.startsWith('ipv6=')) {
      conf.ipv6 = a.slice(5) === 'on';
    } else if (a.startsWith('ipv4=')) {
      conf.ipv4 = a.slice(5) === 'on';
    } else if (a.startsWith('status_zone=')) {
      /* accepted */
    } else {
      const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(a) ?? /^([^:]+)(?::(\d+))?$/.exec(a);
      if (!m || !net.isIP(m[1])) return `invalid parameter "${a}"`;
      conf.servers.push({ host: m[1], port: m[2] ? Number(m[2]) : 53 });
    }
  }
  return conf;
}

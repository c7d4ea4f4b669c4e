/**
 * A small DNS client, nginx's ngx_resolver: A and AAAA queries over UDP to
 * the configured `resolver` addresses (over TCP when an answer comes
 * truncated), resent every 5 s to the next server while someone waits,
 * CNAMEs followed, answers cached for their smallest TTL or `valid=`,
 * errors not cached, several lookups of one name sharing one query. Each
 * lookup has its own timeout (`resolver_timeout` of where it was made).
 * Used for proxy_pass targets built from variables, in HTTP and stream.
 */
import { mainErrorLog } from '../core/error-log.ts';
import { dnsErrorText, encodeQuery, readAnswers, readHeader, readName, TYPE_A, TYPE_AAAA, TYPE_SRV } from './dns-message.ts';
import type { SrvRecord } from './dns-message.ts';
import { DnsServer } from './dns-transport.ts';
import { parseResolverArgs, ResolveError } from './resolver-conf.ts';
import type { Resolved, ResolverConf } from './resolver-conf.ts';
import { rotated } from './resolver-node.ts';
import type { NameNode, Waiter } from './resolver-node.ts';

export { parseResolverArgs, ResolveError } from './resolver-conf.ts';
export type { Resolved, ResolverConf } from './resolver-conf.ts';

const RESEND_MS = 5000;
/** How long an unused answer stays in memory (nginx's r->expire). */
const EXPIRE_MS = 30_000;
const MAX_RECURSION = 50;
const NXDOMAIN = 3;
const TIMEDOUT = 110;

export class Resolver {
  readonly conf: ResolverConf;
  readonly timeoutMs: number;
  private readonly servers: DnsServer[];
  private readonly nodes = new Map<string, NameNode>();
  private readonly srvNodes = new Map<string, NameNode>();
  private lastServer = 0;

  constructor(conf: ResolverConf, timeoutMs: number) {
    this.conf = conf;
    this.timeoutMs = timeoutMs;
    this.servers = conf.servers.map((s) => new DnsServer(s.host, s.port, (msg, tcp) => this.onResponse(msg, tcp)));
  }

  /** Addresses of `name` (IPv4 first), or a ResolveError after at most `timeoutMs`. */
  resolve(name: string, timeoutMs = this.timeoutMs): Promise<string[]> {
    return new Promise((resolve, reject) => this.start(name, timeoutMs, resolve, reject));
  }

  /** The same with how long the answer holds (for names re-resolved when it ends: upstream `server … resolve`). */
  resolveValid(name: string, timeoutMs = this.timeoutMs): Promise<Resolved> {
    return new Promise((resolve, reject) => this.start(name, timeoutMs, (addrs, valid) => resolve({ addrs, valid }), reject));
  }

  /** SRV records of `name` (for resolver-srv.ts, which then resolves their targets). */
  lookupSrv(name: string, timeoutMs: number, srv: NonNullable<Waiter['srv']>, reject: Waiter['reject']): void {
    this.start(name, timeoutMs, () => undefined, reject, srv);
  }

  private start(name: string, timeoutMs: number, resolve: Waiter['resolve'], reject: Waiter['reject'], srv?: Waiter['srv']): void {
    const w: Waiter = { resolve, reject, srv, recursion: 0, node: undefined, timer: undefined as unknown as NodeJS.Timeout };
    w.timer = setTimeout(() => this.timedOut(w), timeoutMs);
    this.lookup(w, name.toLowerCase());
    this.expireUnused();
  }

  close(): void {
    for (const s of this.servers) s.close();
    for (const rn of this.nodes.values()) clearTimeout(rn.resend);
    for (const rn of this.srvNodes.values()) clearTimeout(rn.resend);
  }

  private mapOf(srv: boolean): Map<string, NameNode> {
    return srv ? this.srvNodes : this.nodes;
  }

  /** nginx's ngx_resolve_name_locked(): from the cache, by joining a query, or with a new one. */
  private lookup(w: Waiter, name: string): void {
    const now = Date.now();
    const srv = w.srv !== undefined;
    const map = this.mapOf(srv);
    let rn = map.get(name);
    if (rn) {
      if (rn.valid > now) {
        this.touch(rn, now);
        if (rn.srvs?.length) return this.succeedSrv(w, rn.srvs, rn.valid);
        const n = rn.addrs4!.length + rn.addrs6!.length;
        if (n) return this.succeed(w, rotated(rn), rn.valid);
        if (w.recursion++ < MAX_RECURSION) return this.lookup(w, rn.cname!);
        return this.fail(w, NXDOMAIN);
      }
      if (rn.waiting.length) {
        rn.waiting.push(w);
        w.node = rn;
        return;
      }
      clearTimeout(rn.resend);
    } else {
      rn = {
        name, valid: 0, expire: 0, addrs4: null, addrs6: null, cname: undefined, srv, srvs: undefined, waiting: [],
        query4: undefined, query6: undefined, tcp4: false, tcp6: false, code: 0, ttl: 0, server: 0, resend: undefined,
      };
      map.set(name, rn);
    }
    // an SRV name has one query, in the IPv4 slot
    const q4 = srv || this.conf.ipv4 ? encodeQuery(randomId(), name, srv ? TYPE_SRV : TYPE_A) : undefined;
    const q6 = !srv && this.conf.ipv6 ? encodeQuery(randomId(), name, TYPE_AAAA) : undefined;
    if (!q4 && !q6) {
      map.delete(name);
      return this.fail(w, NXDOMAIN);
    }
    rn.server = this.lastServer++ % this.servers.length;
    rn.query4 = q4;
    rn.query6 = q6;
    rn.addrs4 = q4 ? null : [];
    rn.addrs6 = q6 ? null : [];
    rn.tcp4 = rn.tcp6 = false;
    rn.code = 0;
    rn.cname = undefined;
    rn.srvs = undefined;
    rn.valid = 0;
    rn.ttl = 0xffffffff;
    rn.waiting = [w];
    w.node = rn;
    this.send(rn);
    this.scheduleResend(rn);
  }

  private send(rn: NameNode): void {
    const srv = this.servers[rn.server];
    if (rn.query4 && rn.addrs4 === null) srv.send(rn.query4, rn.tcp4);
    if (rn.query6 && rn.addrs6 === null) srv.send(rn.query6, rn.tcp6);
  }

  /** While someone waits, the outstanding queries go again every 5 s, each time to the next server. */
  private scheduleResend(rn: NameNode): void {
    clearTimeout(rn.resend);
    rn.resend = setTimeout(() => {
      rn.resend = undefined;
      if (!rn.waiting.length) {
        const map = this.mapOf(rn.srv);
        if (map.get(rn.name) === rn) map.delete(rn.name);
        return;
      }
      rn.server = (rn.server + 1) % this.servers.length;
      this.send(rn);
      this.scheduleResend(rn);
    }, RESEND_MS);
    rn.resend.unref();
  }

  private timedOut(w: Waiter): void {
    const rn = w.node;
    if (rn) {
      const i = rn.waiting.indexOf(w);
      if (i >= 0) rn.waiting.splice(i, 1);
    }
    w.node = undefined;
    w.reject(this.error(TIMEDOUT));
  }

  private succeedSrv(w: Waiter, srvs: SrvRecord[], valid: number): void {
    clearTimeout(w.timer);
    w.node = undefined;
    w.srv!(srvs, valid);
  }

  private succeed(w: Waiter, addrs: string[], valid: number): void {
    clearTimeout(w.timer);
    w.node = undefined;
    w.resolve(addrs, valid);
  }

  private fail(w: Waiter, code: number): void {
    clearTimeout(w.timer);
    w.node = undefined;
    w.reject(this.error(code));
  }

  private error(code: number): ResolveError {
    const e = new ResolveError(code, dnsErrorText(code));
    e.valid = Date.now() + (this.conf.validMs || 10_000);
    return e;
  }

  /** Keeps a used answer in memory for another 30 s (the map's order is least recently used first). */
  private touch(rn: NameNode, now: number): void {
    rn.expire = now + EXPIRE_MS;
    const map = this.mapOf(rn.srv);
    map.delete(rn.name);
    map.set(rn.name, rn);
  }

  /** As nginx, drops at most two answers unused for 30 s per lookup. */
  private expireUnused(): void {
    const now = Date.now();
    for (const map of [this.nodes, this.srvNodes]) {
      let n = 0;
      for (const rn of map.values()) {
        if (n++ === 2 || rn.expire >= now || rn.waiting.length || rn.query4 || rn.query6) break;
        map.delete(rn.name);
      }
    }
  }

  /** nginx's ngx_resolver_process_response(): the header and question checked, then the answer. */
  private onResponse(buf: Buffer, tcp: boolean): void {
    const log = mainErrorLog();
    const h = readHeader(buf, tcp);
    if ('error' in h) return log.error(h.error);
    if (h.code === 1) {
      // a format error answers nothing: the query waits for a resend
      const rn = this.byIdent(h.ident);
      const named = rn ? `, name:"${rn.name}"` : '';
      return log.error(`DNS error (1: ${dnsErrorText(1)}), query id:${h.ident}${named}`);
    }
    this.processAnswer(buf, h.ident, h.code, h.qtype, h.nan, h.trunc, h.answers);
  }

  private byIdent(ident: number): NameNode | undefined {
    for (const map of [this.nodes, this.srvNodes]) {
      for (const rn of map.values()) {
        if (rn.query4?.readUInt16BE(0) === ident || rn.query6?.readUInt16BE(0) === ident) return rn;
      }
    }
    return undefined;
  }

  /** nginx's ngx_resolver_process_a(): one family's answer for a name being resolved. */
  private processAnswer(buf: Buffer, ident: number, code: number, qtype: number, nan: number, trunc: boolean, ans: number): void {
    const log = mainErrorLog();
    const q = readName(buf, 12);
    if ('error' in q) return log.error(q.error);
    const map = this.mapOf(qtype === TYPE_SRV);
    const rn = map.get(q.name);
    const v6 = qtype === TYPE_AAAA;
    const query = rn && (v6 ? rn.query6 : rn.query4);
    if (!rn || !query || (v6 ? rn.addrs6 : rn.addrs4) !== null) return log.error(`unexpected DNS response for ${q.name}`);
    if (trunc && (v6 ? rn.tcp6 : rn.tcp4)) return;
    const qident = query.readUInt16BE(0);
    if (ident !== qident) return log.error(`wrong ident ${ident} in DNS response for ${q.name}, expect ${qident}`);

    if (trunc) {
      if (!rn.waiting.length) {
        clearTimeout(rn.resend);
        map.delete(rn.name);
        return;
      }
      if (v6) rn.tcp6 = true;
      else rn.tcp4 = true;
      this.servers[rn.server].send(query, true);
      this.scheduleResend(rn);
      return;
    }

    const setMine = (a: string[]): void => { if (v6) rn.addrs6 = a; else rn.addrs4 = a; };
    const other = (): string[] | null => (v6 ? rn.addrs4 : rn.addrs6);
    if (code === 0 && rn.code) code = rn.code;
    if (code === 0 && nan === 0) {
      setMine([]);
      const o = other();
      if (o === null) return;
      if (o.length) return this.answer(rn);
      code = NXDOMAIN;
    }
    if (code) {
      setMine([]);
      if (other() === null) {
        rn.code = code;
        return;
      }
      // errors are not cached
      clearTimeout(rn.resend);
      map.delete(rn.name);
      const waiting = rn.waiting;
      rn.waiting = [];
      for (const w of waiting) this.fail(w, code);
      return;
    }

    const rrs = readAnswers(buf, ans, nan, qtype, (m) => log.error(m));
    if ('error' in rrs) return log.error(rrs.error);
    rn.ttl = Math.min(rn.ttl, rrs.ttl);
    const { addrs, cname } = rrs;
    if (rrs.srvs.length) {
      // nginx's ngx_resolver_process_srv: the records by priority (a stable sort)
      this.settle(rn);
      rn.srvs = rrs.srvs.sort((a, b) => a.priority - b.priority);
      const waiting = rn.waiting;
      rn.waiting = [];
      for (const w of waiting) this.succeedSrv(w, rn.srvs, rn.valid);
      return;
    }

    setMine(addrs);
    const o = other();
    if (o === null) return; // a CNAME alone is looked at only once both families answered
    if (addrs.length + o.length > 0) return this.answer(rn);
    if (cname < 0) return log.error(rn.srv ? 'no SRV type in DNS response' : 'no A or CNAME types in DNS response');
    const target = readName(buf, cname);
    if ('error' in target) return log.error(target.error);
    this.settle(rn);
    rn.cname = target.name;
    const waiting = rn.waiting;
    rn.waiting = [];
    for (const w of waiting) {
      if (w.recursion++ >= MAX_RECURSION) this.fail(w, NXDOMAIN);
      else this.lookup(w, target.name);
    }
  }

  /** Both families answered: the node becomes a cached answer. */
  private settle(rn: NameNode): void {
    const now = Date.now();
    rn.valid = now + (this.conf.validMs || rn.ttl * 1000);
    rn.expire = now + EXPIRE_MS;
    rn.query4 = rn.query6 = undefined;
    clearTimeout(rn.resend);
    rn.resend = undefined;
  }

  private answer(rn: NameNode): void {
    this.settle(rn);
    const addrs = [...rn.addrs4!, ...rn.addrs6!];
    const waiting = rn.waiting;
    rn.waiting = [];
    for (const w of waiting) this.succeed(w, addrs, rn.valid);
  }
}

function randomId(): number {
  return Math.floor(Math.random() * 0x10000);
}

const byArgs = new WeakMap<string[], Resolver | null>();

/**
 * The resolver of one `resolver` line (its argument list), one per worker
 * with its own cache, as nginx makes one per directive; undefined when the
 * line names no server.
 */
export function resolverForArgs(args: string[], parseTimeMs: (s: string) => number, timeoutMs: number): Resolver | undefined {
  let res = byArgs.get(args);
  if (res === undefined) {
    const conf = parseResolverArgs(args, parseTimeMs);
    res = typeof conf === 'string' || conf.servers.length === 0 ? null : new Resolver(conf, timeoutMs);
    byArgs.set(args, res);
  }
  return res ?? undefined;
}

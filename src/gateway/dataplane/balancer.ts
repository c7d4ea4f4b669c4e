/**
 * An upstream object's nodes as the engine's per-try peer seam sees them
 * (apisix/balancer.lua): `roundrobin` is lua-resty-balancer's interleaved
 * weighted round robin (GCD-stepped current weight, state per worker and
 * upstream version, weight-0 nodes only when all are 0); `chash` hashes
 * the request's key onto a ring of node points; `least_conn` takes the node
 * with the fewest requests in flight for its weight ((active + 1) / weight,
 * counted in this worker). Nodes of a lower
 * `priority` are used only when every node of the higher ones failed. A
 * retry goes to a node not tried yet; `retries` (default: nodes − 1) caps
 * the tries. `ewma` takes the better of two random nodes by latency
 * (ewma.ts). With `checks` (health.ts) unhealthy nodes are left out while
 * some node is healthy; when none is, all are tried (apisix/balancer.lua's
 * "all upstream nodes is unhealthy, use default"). `keepalive_pool` gives
 * the upstream its own idle connections, and `tls.client_cert` (or
 * `client_cert_id`) a client certificate for https nodes; `tls.verify`
 * checks their certificates against apisix.ssl.ssl_trusted_certificate (or
 * the system's CAs) and the name the request is sent with.
 */
import net from 'node:net';
import tls from 'node:tls';
import { crc32 } from 'node:zlib';
import { FT } from '../../http/upstream/conf.ts';
import { KeepalivePool } from '../../upstream/keepalive.ts';
import type { KeepaliveConf } from '../../upstream/keepalive.ts';
import { peerAt } from '../../upstream/peer-chooser.ts';
import type { ChosenPeer, PeerChooser } from '../../upstream/peer-chooser.ts';
import type { ConfigView, UpstreamConf } from '../router/config-view.ts';
import { ewmaPick, ewmaUpdate } from './ewma.ts';
import { checkerFor } from './health.ts';
import { addressOf, resolveNames } from './node-names.ts';
import type { HealthChecker } from './health.ts';

export interface GatewayNode {
  host: string;
  port: number;
  weight: number;
  priority: number;
  /** host:port as the upstream names it (`pass_host: node` sends the host, and the port when not the scheme's). */
  name: string;
}

function defaultPort(scheme: string | undefined): number {
  return scheme === 'https' || scheme === 'grpcs' ? 443 : 80;
}

function splitHostPort(text: string, scheme: string | undefined): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(text);
  if (!m) return { host: text, port: defaultPort(scheme) };
  return { host: m[1], port: m[2] === undefined ? defaultPort(scheme) : Number(m[2]) };
}

export function nodesOf(u: UpstreamConf): GatewayNode[] {
  const nodes = u.nodes;
  if (!nodes) return [];
  const list = Array.isArray(nodes)
    ? nodes.map((n) => ({ host: n.host, port: n.port ?? defaultPort(u.scheme), weight: n.weight, priority: n.priority ?? 0 }))
    : Object.entries(nodes).map(([hp, weight]) => ({ ...splitHostPort(hp, u.scheme), weight, priority: 0 }));
  return list.map((n) => ({ ...n, name: `${n.host}:${n.port}` }));
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** lua-resty-balancer's roundrobin over one priority group. */
class WeightedRoundRobin {
  private readonly nodes: GatewayNode[];
  private readonly step: number;
  private readonly max: number;
  private last: number;
  private current = 0;

  constructor(nodes: GatewayNode[]) {
    const usable = nodes.some((n) => n.weight > 0) ? nodes.filter((n) => n.weight > 0) : nodes.map((n) => ({ ...n, weight: 1 }));
    this.nodes = usable;
    this.step = usable.reduce((g, n) => gcd(g, n.weight), 0) || 1;
    this.max = Math.max(...usable.map((n) => n.weight));
    // APISIX starts each worker's walk at a random node
    this.last = Math.floor(Math.random() * usable.length);
  }

  next(skip: Set<string>): GatewayNode | undefined {
    if (this.nodes.every((n) => skip.has(n.name))) return undefined;
    for (;;) {
      this.last = (this.last + 1) % this.nodes.length;
      if (this.last === 0) {
        this.current -= this.step;
        if (this.current <= 0) this.current = this.max;
      }
      const n = this.nodes[this.last];
      if (n.weight >= this.current && !skip.has(n.name)) return n;
    }
  }
}

/** A ring of 160 points per unit of weight (resty.chash's shape), searched for the first point at or after the key's hash. */
class HashRing {
  private readonly points: Array<[number, GatewayNode]> = [];

  constructor(nodes: GatewayNode[]) {
    for (const n of nodes) {
      const count = 160 * Math.max(n.weight, nodes.every((x) => x.weight === 0) ? 1 : 0);
      for (let i = 0; i < count; i++) this.points.push([crc32(`${n.name}#${i}`) >>> 0, n]);
    }
    this.points.sort((a, b) => a[0] - b[0]);
  }

  next(key: string, skip: Set<string>): GatewayNode | undefined {
    const pts = this.points;
    if (pts.length === 0) return undefined;
    const h = crc32(key) >>> 0;
    let lo = 0;
    let hi = pts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (pts[mid][0] < h) lo = mid + 1;
      else hi = mid;
    }
    for (let i = 0; i < pts.length; i++) {
      const n = pts[(lo + i) % pts.length][1];
      if (!skip.has(n.name)) return n;
    }
    return undefined;
  }
}

/** One upstream version's balancing state in this worker: a picker per priority group, highest first. */
export class UpstreamBalancer {
  readonly nodes: GatewayNode[];
  readonly conf: UpstreamConf;
  private readonly groups: Array<{ rr: WeightedRoundRobin; ring: HashRing | undefined; nodes: GatewayNode[] }>;
  /** least_conn: requests in flight per node, in this worker. */
  readonly active = new Map<string, number>();
  /** The nodes' hosts that are names, not addresses (resolved before a request picks). */
  private readonly names: string[];
  /** The peer of each node at an address, made once (it is the same for every try). */
  private readonly peers = new Map<string, ChosenPeer>();
  /** The upstream's health checks, when it has `checks` (set by balancerFor, per request). */
  checker: HealthChecker | undefined;
  /**
   * The upstream's own idle connections (`keepalive_pool`, or a client certificate's), one pool of
   * `size` per node as APISIX names a pool per scheme, host and port; else the gateway's.
   */
  private readonly pools: Map<string, KeepalivePool> | undefined;
  private readonly poolConf: KeepaliveConf | undefined;
  /** The client certificate for https nodes, and with `tls.verify` the CAs their certificates are checked against. */
  readonly tls: tls.ConnectionOptions | undefined;

  constructor(conf: UpstreamConf, clientCert?: { cert: string; key: string }) {
    this.conf = conf;
    this.nodes = nodesOf(conf);
    this.names = this.nodes.map((n) => n.host).filter((h) => net.isIP(h.replace(/^\[|\]$/g, '')) === 0);
    const verify = conf.scheme === 'https' && conf.tls?.verify === true;
    if (clientCert || verify) {
      this.tls = {
        ...(clientCert && { cert: clientCert.cert, key: clientCert.key }),
        ...(verify && { rejectUnauthorized: true, ...(trustedCas !== undefined && { ca: trustedCas }) }),
      };
    }
    const kp = conf.keepalive_pool;
    if (kp || this.tls) {
      // APISIX's defaults, as nginx_config.http.upstream's keepalive 320, keepalive_requests 1000, keepalive_timeout 60s
      this.poolConf = { max: kp?.size ?? 320, requests: kp?.requests ?? 1000, timeMs: 3600_000, timeoutMs: (kp?.idle_timeout ?? 60) * 1000 };
      this.pools = new Map();
    }
    const prios = [...new Set(this.nodes.map((n) => n.priority))].sort((a, b) => b - a);
    const chash = conf.type === 'chash';
    this.groups = prios.map((p) => {
      const list = this.nodes.filter((n) => n.priority === p);
      return { rr: new WeightedRoundRobin(list), ring: chash ? new HashRing(list) : undefined, nodes: list };
    });
  }

  /** The node's own pool, when the upstream has pools. */
  poolOf(node: string): KeepalivePool | undefined {
    if (!this.pools) return undefined;
    let p = this.pools.get(node);
    if (!p) this.pools.set(node, (p = new KeepalivePool(this.poolConf!)));
    return p;
  }

  /** The peer made for a node at an address (keepAddressPeer), if any. */
  addressPeer(node: string): ChosenPeer | undefined {
    return this.peers.get(node);
  }

  keepAddressPeer(node: string, peer: ChosenPeer): void {
    this.peers.set(node, peer);
  }

  /** Closes the idle connections of a retired version. */
  closePools(): void {
    for (const p of this.pools?.values() ?? []) p.close();
  }

  /** Resolves the nodes' host names whose answers are missing or expired (undefined: none to wait for). */
  resolveNames(): Promise<void> | undefined {
    return this.names.length ? resolveNames(this.names) : undefined;
  }

  /** The next node not in `tried` (nor unhealthy while some node is healthy), from the highest priority group that has one. */
  pick(key: string, tried: Set<string>): GatewayNode | undefined {
    const skip = this.withUnhealthy(tried);
    const type = this.conf.type;
    for (const g of this.groups) {
      const n = g.ring ? g.ring.next(key, skip)
        : type === 'least_conn' ? this.fewest(g.nodes, skip)
          : type === 'ewma' ? ewmaPick(g.nodes.filter((x) => !skip.has(x.name)))
            : g.rr.next(skip);
      if (n) return n;
    }
    return undefined;
  }

  /** `tried` and the unhealthy nodes, unless every node is unhealthy (then all are used, as APISIX). */
  private withUnhealthy(tried: Set<string>): Set<string> {
    const c = this.checker;
    if (!c || this.nodes.length < 2) return tried;
    const sick = this.nodes.filter((n) => !c.isHealthy(n.name));
    if (sick.length === 0 || sick.length === this.nodes.length) return tried;
    const skip = new Set(tried);
    for (const n of sick) skip.add(n.name);
    return skip;
  }

  private fewest(nodes: GatewayNode[], tried: Set<string>): GatewayNode | undefined {
    let best: GatewayNode | undefined;
    let bestScore = Infinity;
    for (const n of nodes) {
      if (tried.has(n.name) || n.weight <= 0) continue;
      const score = ((this.active.get(n.name) ?? 0) + 1) / n.weight;
      if (score < bestScore) { best = n; bestScore = score; }
    }
    return best;
  }
}

/** apisix.ssl.ssl_trusted_certificate as PEM text; undefined: the system's CAs. */
let trustedCas: string | undefined;

/** Set once at start-up from config.yaml. */
export function trustUpstreamCas(pem: string | undefined): void {
  trustedCas = pem;
}

const balancers = new WeakMap<UpstreamConf, UpstreamBalancer>();
/** The last balancer of each upstream key, kept while its nodes and type stay the same (a route edit keeps the walk). */
const byKey = new Map<string, { sig: string; b: UpstreamBalancer }>();

export function balancerFor(conf: UpstreamConf, key: string, view?: ConfigView): UpstreamBalancer {
  let b = balancers.get(conf);
  // an SSL object named by client_cert_id may change while the upstream stays the same
  if (b && conf.tls?.client_cert_id !== undefined && clientCertOf(conf, view)?.cert !== b.tls?.cert) b = undefined;
  if (!b) {
    const cert = clientCertOf(conf, view);
    const sig = JSON.stringify([conf.nodes, conf.type, conf.hash_on, conf.key, conf.keepalive_pool, cert?.cert, conf.scheme, conf.tls?.verify]);
    const kept = byKey.get(key);
    if (kept && kept.sig === sig) b = kept.b;
    else {
      kept?.b.closePools();
      b = new UpstreamBalancer(conf, cert);
    }
    byKey.set(key, { sig, b });
    balancers.set(conf, b);
  }
  b.checker = checkerFor(key, conf, b.nodes, b.tls);
  return b;
}

/** `tls.client_cert`/`client_key`, or the SSL object (`type: client`) `tls.client_cert_id` names. */
function clientCertOf(conf: UpstreamConf, view: ConfigView | undefined): { cert: string; key: string } | undefined {
  const t = conf.tls;
  if (t?.client_cert && t.client_key) return { cert: t.client_cert, key: t.client_key };
  if (t?.client_cert_id === undefined || !view) return undefined;
  const ssl = view.ssls.find((s) => String(s.conf.id) === String(t.client_cert_id))?.conf;
  return ssl ? { cert: ssl.cert, key: ssl.key } : undefined;
}

/** r → its chooser, for the log phase's passive report and ewma sample. */
const choosers = new WeakMap<object, GatewayChooser>();

/** The chooser of a request, made in the access phase. */
export function chooserFor(r: object, b: UpstreamBalancer, hashKey: string): GatewayChooser {
  const c = new GatewayChooser(b, hashKey);
  choosers.set(r, c);
  return c;
}

/**
 * The log phase (apisix/init.lua's healthcheck_passive and the picker's
 * after_balance): the answer's status counted for the last node tried, and
 * for ewma the last try's connect + response time. `read` reads a variable.
 */
export function afterResponse(r: object, status: number, read: (name: string) => string | undefined): void {
  const c = choosers.get(r);
  const node = c?.lastNode;
  if (!c || !node) return;
  c.balancer.checker?.reportStatus(node, status);
  if (c.balancer.conf.type !== 'ewma') return;
  const last = (name: string): number => Number((read(name) ?? '').split(/[,:]\s*/).pop()) || 0;
  ewmaUpdate(node, last('upstream_connect_time') + last('upstream_response_time'));
}

/** One request's tries over a balancer: the first node is chosen early (the Host header may need it). */
export class GatewayChooser implements PeerChooser {
  tries: number;
  readonly balancer: UpstreamBalancer;
  /** The node of the last try (reported on in the log phase). */
  lastNode: string | undefined;
  /** With `tls.verify`: the name the node's certificate must have (the upstream Host, as APISIX's proxy_ssl_name). */
  verifyName: string | undefined;
  private readonly key: string;
  private readonly tried = new Set<string>();
  private first: GatewayNode | undefined;
  private used = false;
  /** The node of the try in progress (least_conn counts it until free). */
  private current: string | undefined;

  constructor(b: UpstreamBalancer, hashKey: string) {
    this.balancer = b;
    this.key = hashKey;
    const retries = b.conf.retries ?? Math.max(0, b.nodes.length - 1);
    this.tries = retries + 1;
    this.first = b.pick(hashKey, this.tried);
  }

  firstNode(): GatewayNode | undefined {
    return this.first;
  }

  get(lastFailure: number, lastStatus: number): ChosenPeer | undefined {
    const b = this.balancer;
    // a retry: the try before failed (apisix/balancer.lua reports it to the checker before picking again)
    if (this.lastNode && b.checker && lastFailure) {
      if (lastFailure & FT.TIMEOUT) b.checker.reportFailure(this.lastNode, 'timeout');
      else if (lastFailure & FT.ERROR) b.checker.reportFailure(this.lastNode, 'tcp');
      else b.checker.reportStatus(this.lastNode, lastStatus);
    }
    let n: GatewayNode | undefined;
    if (!this.used && this.first) n = this.first;
    else n = b.pick(this.key, this.tried);
    this.used = true;
    if (!n) return undefined;
    this.tried.add(n.name);
    this.current = n.name;
    this.lastNode = n.name;
    b.active.set(n.name, (b.active.get(n.name) ?? 0) + 1);
    const host = n.host.startsWith('[') ? n.host.slice(1, -1) : n.host;
    const verify = b.tls?.rejectUnauthorized === true;
    // a node at an address: the same peer every try, made once
    const known = verify ? undefined : b.addressPeer(n.name);
    if (known) return known;
    // a name: its resolved address (node-names.ts), else the system resolver at connect time
    const ip = net.isIP(host) ? host : addressOf(host);
    const peer: ChosenPeer = ip ? peerAt(ip, n.port) : { name: n.name, addr: { name: n.name, host, port: n.port } };
    const pool = b.poolOf(n.name);
    if (!verify) {
      const chosen = pool || b.tls ? { ...peer, pool, tls: b.tls } : peer;
      if (ip === host) b.keepAddressPeer(n.name, chosen);
      return chosen;
    }
    // the name checked is the request's upstream host (an address: the node's), without its port
    const name = (this.verifyName ?? host).replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
    // and sent as SNI (APISIX's proxy_ssl_name $upstream_host, proxy_ssl_server_name on); an address is not
    const servername = net.isIP(name) ? '' : name;
    return { ...peer, pool, tls: { ...b.tls, servername, checkServerIdentity: (_: string, cert: tls.PeerCertificate) => tls.checkServerIdentity(name, cert) } };
  }

  free(): boolean {
    if (this.tries) this.tries--;
    if (this.current !== undefined) {
      const active = this.balancer.active;
      const left = (active.get(this.current) ?? 1) - 1;
      if (left > 0) active.set(this.current, left);
      else active.delete(this.current);
      this.current = undefined;
    }
    return false;
  }
}

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
 * the tries.
 */
import net from 'node:net';
import { crc32 } from 'node:zlib';
import { peerAt } from '../../upstream/peer-chooser.ts';
import type { ChosenPeer, PeerChooser } from '../../upstream/peer-chooser.ts';
import type { UpstreamConf } from '../router/config-view.ts';

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

  constructor(conf: UpstreamConf) {
    this.conf = conf;
    this.nodes = nodesOf(conf);
    const prios = [...new Set(this.nodes.map((n) => n.priority))].sort((a, b) => b - a);
    const chash = conf.type === 'chash';
    this.groups = prios.map((p) => {
      const list = this.nodes.filter((n) => n.priority === p);
      return { rr: new WeightedRoundRobin(list), ring: chash ? new HashRing(list) : undefined, nodes: list };
    });
  }

  /** The next node not in `tried`, from the highest priority group that has one. */
  pick(key: string, tried: Set<string>): GatewayNode | undefined {
    const leastConn = this.conf.type === 'least_conn';
    for (const g of this.groups) {
      const n = g.ring ? g.ring.next(key, tried) : leastConn ? this.fewest(g.nodes, tried) : g.rr.next(tried);
      if (n) return n;
    }
    return undefined;
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

const balancers = new WeakMap<UpstreamConf, UpstreamBalancer>();
/** The last balancer of each upstream key, kept while its nodes and type stay the same (a route edit keeps the walk). */
const byKey = new Map<string, { sig: string; b: UpstreamBalancer }>();

export function balancerFor(conf: UpstreamConf, key: string): UpstreamBalancer {
  let b = balancers.get(conf);
  if (b) return b;
  const sig = JSON.stringify([conf.nodes, conf.type, conf.hash_on, conf.key]);
  const kept = byKey.get(key);
  b = kept && kept.sig === sig ? kept.b : new UpstreamBalancer(conf);
  byKey.set(key, { sig, b });
  balancers.set(conf, b);
  return b;
}

/** One request's tries over a balancer: the first node is chosen early (the Host header may need it). */
export class GatewayChooser implements PeerChooser {
  tries: number;
  private readonly b: UpstreamBalancer;
  private readonly key: string;
  private readonly tried = new Set<string>();
  private first: GatewayNode | undefined;
  private used = false;
  /** The node of the try in progress (least_conn counts it until free). */
  private current: string | undefined;

  constructor(b: UpstreamBalancer, hashKey: string) {
    this.b = b;
    this.key = hashKey;
    const retries = b.conf.retries ?? Math.max(0, b.nodes.length - 1);
    this.tries = retries + 1;
    this.first = b.pick(hashKey, this.tried);
  }

  firstNode(): GatewayNode | undefined {
    return this.first;
  }

  get(): ChosenPeer | undefined {
    let n: GatewayNode | undefined;
    if (!this.used && this.first) n = this.first;
    else n = this.b.pick(this.key, this.tried);
    this.used = true;
    if (!n) return undefined;
    this.tried.add(n.name);
    this.current = n.name;
    this.b.active.set(n.name, (this.b.active.get(n.name) ?? 0) + 1);
    const host = n.host.startsWith('[') ? n.host.slice(1, -1) : n.host;
    if (net.isIP(host)) return peerAt(host, n.port);
    return { name: n.name, addr: { name: n.name, host, port: n.port } };
  }

  free(): boolean {
    if (this.tries) this.tries--;
    if (this.current !== undefined) {
      const left = (this.b.active.get(this.current) ?? 1) - 1;
      if (left > 0) this.b.active.set(this.current, left);
      else this.b.active.delete(this.current);
      this.current = undefined;
    }
    return false;
  }
}

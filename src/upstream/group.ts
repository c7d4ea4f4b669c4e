/**
 * Upstream groups and their peers (nginx's ngx_http_upstream_srv_conf_t and
 * ngx_http_upstream_rr_peers_t), independent of the protocol that uses them
 * so TCP stream proxying can share them. A group is built once per
 * configuration in each worker, so its run-time state (weights, failures,
 * connection counts, idle keepalive connections) is per worker, as in nginx
 * without a `zone`.
 */
import { sharedZone } from '../core/shared.ts';
import type { PeerAddress } from './address.ts';
import { buildRing } from './balancers.ts';
import type { Balancer, ChashRing } from './balancers.ts';
import type { KeepalivePool } from './keepalive.ts';

/** One `server` line of an `upstream {}` block. */
export interface ServerSpec {
  /** The address as written (`backend:8080`), nginx's peer->server. */
  name: string;
  addrs: PeerAddress[];
  weight: number;
  maxFails: number;
  /** Seconds, as nginx keeps it. */
  failTimeout: number;
  maxConns: number;
  backup: boolean;
  down: boolean;
  /** `resolve`: the name is resolved while running (its peers come and go); addrs stays empty. */
  resolve?: { host: string; port: number; service?: string; memory?: SharedArrayBuffer };
}

/** Run-time fields of a peer, as Int32 slots: in private memory, or in a shared zone (`zone`). */
const CURRENT_WEIGHT = 0;
const EFFECTIVE_WEIGHT = 1;
const CONNS = 2;
const FAILS = 3;
const ACCESSED = 4;
const CHECKED = 5;
export const PEER_SLOTS = 6;

/**
 * One address of one server, with the round-robin state nginx keeps per
 * peer. The state lives in Int32 slots so that a group with a `zone` shares
 * it between worker threads (a SharedArrayBuffer), as nginx's shared zone
 * does; without a zone each worker has its own.
 */
export class Peer {
  readonly addr: PeerAddress;
  /** `$upstream_addr` text. */
  readonly name: string;
  /** The `server` text it came from. */
  readonly server: string;
  readonly weight: number;
  readonly maxFails: number;
  readonly failTimeout: number;
  readonly maxConns: number;
  down: boolean;
  private readonly s: Int32Array;

  constructor(addr: PeerAddress, spec: Pick<ServerSpec, 'name' | 'weight' | 'maxFails' | 'failTimeout' | 'maxConns' | 'down'>, state?: Int32Array) {
    this.addr = addr;
    this.name = addr.name;
    this.server = spec.name;
    this.weight = spec.weight;
    this.maxFails = spec.maxFails;
    this.failTimeout = spec.failTimeout;
    this.maxConns = spec.maxConns;
    this.down = spec.down;
    this.s = state ?? new Int32Array(PEER_SLOTS);
    // a zone that already holds state (a reload, another worker) keeps it
    if (this.s[EFFECTIVE_WEIGHT] === 0 && this.s[CURRENT_WEIGHT] === 0) this.s[EFFECTIVE_WEIGHT] = spec.weight;
  }

  get currentWeight(): number { return this.s[CURRENT_WEIGHT]; }
  set currentWeight(v: number) { this.s[CURRENT_WEIGHT] = v; }
  get effectiveWeight(): number { return this.s[EFFECTIVE_WEIGHT]; }
  set effectiveWeight(v: number) { this.s[EFFECTIVE_WEIGHT] = v; }
  /** Active connections to this peer (for max_conns and least_conn); of every worker with a zone. */
  get conns(): number { return this.s[CONNS]; }
  /** Counts a connection in (1) or out (-1); atomic, as other workers may count too. */
  addConn(n: number): void { Atomics.add(this.s, CONNS, n); }
  get fails(): number { return this.s[FAILS]; }
  set fails(v: number) { this.s[FAILS] = v; }
  /** Times in seconds (nginx's ngx_time()). */
  get accessed(): number { return this.s[ACCESSED]; }
  set accessed(v: number) { this.s[ACCESSED] = v; }
  get checked(): number { return this.s[CHECKED]; }
  set checked(v: number) { this.s[CHECKED] = v; }
}

/** The primary or backup peers of a group (ngx_http_upstream_rr_peers_t). */
export class PeerList {
  readonly peers: Peer[];
  readonly single: boolean;
  readonly weighted: boolean;
  readonly totalWeight: number;
  /** Peers not marked down: how many tries a request gets from this list. */
  readonly tries: number;
  next: PeerList | undefined;

  constructor(peers: Peer[], single?: boolean) {
    this.peers = peers;
    this.single = single ?? peers.length === 1;
    let w = 0;
    let t = 0;
    for (const p of peers) {
      w += p.weight;
      if (!p.down) t++;
    }
    this.totalWeight = w;
    this.weighted = w !== peers.length;
    this.tries = t;
  }
}

/** Upstream keepalive settings (`keepalive`, `keepalive_requests`, `keepalive_time`, `keepalive_timeout`). */
export interface KeepaliveConf {
  max: number;
  requests: number;
  timeMs: number;
  timeoutMs: number;
}

export class UpstreamGroup {
  /** The upstream's name (`backend`), or the host of an implicit group. */
  readonly name: string;
  /** Port of an implicit group (proxy_pass http://host:port), else undefined. */
  readonly port: number | undefined;
  /** Defined by `upstream {}` (false: implicit, from proxy_pass). */
  readonly explicit: boolean;
  /** An implicit group for a unix socket (`name` is its path). */
  readonly unix: boolean;
  readonly servers: ServerSpec[] = [];
  primary: PeerList = new PeerList([]);
  keepalive: KeepaliveConf | undefined;
  /** How peers are picked (`ip_hash`, `hash`, `least_conn`, `random`; round robin otherwise). */
  balancer: Balancer = { kind: 'round_robin' };
  /** The `hash` key as the protocol compiled it (evaluated per request by the protocol's module). */
  balanceKey: unknown;
  /** The consistent-hash ring (`hash ... consistent`). */
  ring: ChashRing | undefined;
  /** Idle connections of this worker (created when the worker starts). */
  pool: KeepalivePool | undefined;
  readonly file: string;
  readonly line: number;

  constructor(name: string, port: number | undefined, explicit: boolean, unix: boolean, file: string, line: number) {
    this.name = name;
    this.port = port;
    this.explicit = explicit;
    this.unix = unix;
    this.file = file;
    this.line = line;
  }

  /** `resolver` and `resolver_timeout` of the upstream block (nginx 1.27.3+), for `resolve` servers. */
  resolverArgs: string[] | undefined;
  resolverTimeout: number | undefined;

  /** `zone name [size]`: the peers' state is shared between workers. */
  zone: { name: string; size: number } | undefined;
  /** Shared memory for the peers' state (`zone`), set before init(). */
  zoneMemory: SharedArrayBuffer | undefined;

  /**
   * With `zone`: the peers' state in shared memory, the same for every
   * worker (made by the master as it loads); `use` keeps http's and
   * stream's groups of one name apart.
   */
  attachZone(use: string): void {
    if (!this.zone) return;
    const need = Math.max(this.peerCount() * PEER_SLOTS * 4, 8);
    const servers = this.servers.map((s) => s.name).join(',');
    this.zoneMemory = sharedZone(`${use}:${this.zone.name}:${this.name}:${servers}`, Math.max(need, this.zone.size));
  }

  /** How many peers the servers make (the size a zone must hold). */
  peerCount(): number {
    let n = 0;
    for (const s of this.servers) n += s.addrs.length;
    return n;
  }

  /** Builds the peer lists from the servers (ngx_http_upstream_init_round_robin). */
  init(): void {
    const primary: Peer[] = [];
    const backup: Peer[] = [];
    let slot = 0;
    for (const s of this.servers) {
      for (const a of s.addrs) {
        const state = this.zoneMemory ? new Int32Array(this.zoneMemory, slot++ * PEER_SLOTS * 4, PEER_SLOTS) : undefined;
        (s.backup ? backup : primary).push(new Peer(a, s, state));
      }
    }
    this.primary = new PeerList(primary, primary.length === 1 && backup.length === 0);
    if (backup.length) this.primary.next = new PeerList(backup, false);
    if (this.balancer.kind === 'hash' && this.balancer.consistent) this.ring = buildRing(this.primary);
  }

  /** New peer lists (a `resolve` server's addresses changed); requests under way keep the old ones. */
  setPeers(list: PeerList): void {
    this.primary = list;
    if (this.balancer.kind === 'hash' && this.balancer.consistent) this.ring = buildRing(list);
  }

  /** How many peers a request may try (ngx_http_upstream_tries). */
  get tries(): number {
    return this.primary.tries + (this.primary.next?.tries ?? 0);
  }
}

/** Peers for an address resolved at run time (proxy_pass with variables): nginx's defaults, max_fails 1, fail_timeout 10. */
export function resolvedPeerList(addrs: PeerAddress[], serverName: string): PeerList {
  return new PeerList(addrs.map((a) => new Peer(a, {
    name: serverName, weight: 1, maxFails: 1, failTimeout: 10, maxConns: 0, down: false,
  })));
}

/**
 * A `server` line of an `upstream {}` block and the peers it becomes, with
 * the round-robin state nginx keeps per peer (ngx_http_upstream_rr_peer_t)
 * and the primary or backup list (ngx_http_upstream_rr_peers_t). Below the
 * group and the balancers, which both use them.
 */
import type { PeerAddress } from './address.ts';

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

/**
 * Upstream groups (nginx's ngx_http_upstream_srv_conf_t; their peers are in
 * peer.ts), independent of the protocol that uses them
 * so TCP stream proxying can share them. A group is built once per
 * configuration in each worker, so its run-time state (weights, failures,
 * connection counts, idle keepalive connections) is per worker, as in nginx
 * without a `zone`.
 */
import { sharedZone } from '../core/shared.ts';
import type { PeerAddress } from './address.ts';
import { buildRing } from './balancers.ts';
import type { Balancer, ChashRing } from './balancers.ts';
import type { KeepaliveConf, KeepalivePool } from './keepalive.ts';
import { PEER_SLOTS, Peer, PeerList } from './peer.ts';
import type { ServerSpec } from './peer.ts';

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

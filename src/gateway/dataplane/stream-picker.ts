/**
 * A stream route's upstream as the stream proxy's peer picker: the nodes
 * are chosen by the gateway's balancer (src/gateway/dataplane/balancer.ts:
 * roundrobin, chash, least_conn, priorities), each try on a node not tried
 * yet, `retries` (default: nodes − 1) more after the first; the proxy
 * keeps its own connect, retry and byte accounting on the peers. With
 * `checks`, unhealthy nodes are skipped as for HTTP and a failed connection
 * is a passive TCP failure.
 */
import { Peer, PeerList } from '../../upstream/peer.ts';
import { nowSec, PEER_FAILED, RoundRobinPicker } from '../../upstream/round-robin.ts';
import type { UpstreamBalancer } from './balancer.ts';

const lists = new WeakMap<UpstreamBalancer, PeerList>();

function peerListOf(b: UpstreamBalancer): PeerList {
  let list = lists.get(b);
  if (!list) {
    const peers = b.nodes.map((n) => new Peer(
      { name: n.name, host: n.host.replace(/^\[|\]$/g, ''), port: n.port },
      // failures are the balancer's business (a retry skips the node), not nginx's max_fails
      { name: n.name, weight: Math.max(1, n.weight), maxFails: 0, failTimeout: 10, maxConns: 0, down: false },
    ));
    list = new PeerList(peers, false);
    lists.set(b, list);
  }
  return list;
}

export class GatewayStreamPicker extends RoundRobinPicker {
  private readonly balancer: UpstreamBalancer;
  private readonly hashKey: string;
  private readonly triedNodes = new Set<string>();

  constructor(b: UpstreamBalancer, hashKey: string) {
    super(peerListOf(b));
    this.balancer = b;
    this.hashKey = hashKey;
    this.tries = (b.conf.retries ?? Math.max(0, b.nodes.length - 1)) + 1;
  }

  override get(): Peer | undefined {
    const n = this.balancer.pick(this.hashKey, this.triedNodes);
    if (!n) return undefined;
    this.triedNodes.add(n.name);
    // least_conn counts the sessions in flight per node, as the HTTP chooser counts requests
    this.balancer.active.set(n.name, (this.balancer.active.get(n.name) ?? 0) + 1);
    const i = this.list.peers.findIndex((p) => p.name === n.name);
    return this.take(this.list.peers[i], i, nowSec());
  }

  override free(state: number): boolean {
    const name = this.current?.name;
    if (name !== undefined) {
      // a connection that failed counts for the node's health (a stream upstream's passive check is TCP only)
      if (state & PEER_FAILED) this.balancer.checker?.reportFailure(name, 'tcp');
      const left = (this.balancer.active.get(name) ?? 1) - 1;
      if (left > 0) this.balancer.active.set(name, left);
      else this.balancer.active.delete(name);
    }
    return super.free(state);
  }
}

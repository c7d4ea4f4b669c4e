/**
 * nginx's smooth weighted round robin with failure accounting
 * (ngx_http_upstream_round_robin.c): each request keeps the set of peers it
 * tried; a peer that failed `max_fails` times within `fail_timeout` is
 * skipped until `fail_timeout` has passed; backup peers are used when every
 * primary peer is unavailable.
 */
import type { Peer, PeerList } from './peer.ts';
import type { PeerChooser } from './peer-chooser.ts';

/** What a try's end means for the peer (NGX_PEER_FAILED / NGX_PEER_NEXT / success). */
export const PEER_OK = 0;
export const PEER_FAILED = 1;
/** 403/404 from the peer: try the next one without counting a failure. */
export const PEER_NEXT = 2;

export function nowSec(): number {
  return Math.floor(Date.now() / 1000);
}

/** One request's view of a peer list: nginx's ngx_http_upstream_rr_peer_data_t (the default peer chooser). */
export class RoundRobinPicker implements PeerChooser {
  protected list: PeerList;
  /** Tried peers of the current list: a bit mask for up to 32 peers, else a set of indexes. */
  private tried = 0;
  private triedMany: Set<number> | undefined;
  current: Peer | undefined;
  /** Tries left (nginx's pc->tries). */
  tries: number;

  constructor(list: PeerList) {
    this.list = list;
    this.tries = list.tries + (list.next?.tries ?? 0);
  }

  /** The next peer to try, or undefined when none is available ("no live upstreams"). */
  get(): Peer | undefined {
    for (;;) {
      const list = this.list;
      let peer: Peer | undefined;
      if (list.single) {
        const p = list.peers[0];
        if (!p.down && !(p.maxConns && p.conns >= p.maxConns)) peer = p;
      } else {
        peer = this.pick(list);
      }
      if (peer) {
        this.current = peer;
        peer.addConn(1);
        return peer;
      }
      if (!list.next) return undefined;
      this.useBackup();
    }
  }

  /** Moves on to the backup peers, none of them tried yet. */
  protected useBackup(): void {
    this.list = this.list.next!;
    this.tried = 0;
    this.triedMany = undefined;
  }

  protected isTried(i: number): boolean {
    return i < 32 ? (this.tried & (1 << i)) !== 0 : this.triedMany?.has(i) === true;
  }

  protected markTried(i: number): void {
    if (i < 32) this.tried |= 1 << i;
    else (this.triedMany ??= new Set()).add(i);
  }

  /** Whether `peer` may be given a request now (not down, not failed within fail_timeout, under max_conns). */
  protected usable(peer: Peer, now: number): boolean {
    if (peer.down) return false;
    if (peer.maxFails && peer.fails >= peer.maxFails && now - peer.checked <= peer.failTimeout) return false;
    return !(peer.maxConns && peer.conns >= peer.maxConns);
  }

  /** Hands out `peer` (index `i` of the current list): the common end of every balancer's choice. */
  protected take(peer: Peer, i: number, now: number): Peer {
    this.markTried(i);
    if (now - peer.checked > peer.failTimeout) peer.checked = now;
    this.current = peer;
    peer.addConn(1);
    return peer;
  }

  private pick(list: PeerList): Peer | undefined {
    const now = nowSec();
    let best: Peer | undefined;
    let bestIndex = 0;
    let total = 0;
    const peers = list.peers;
    for (let i = 0; i < peers.length; i++) {
      if (this.isTried(i)) continue;
      const peer = peers[i];
      if (peer.down) continue;
      if (peer.maxFails && peer.fails >= peer.maxFails && now - peer.checked <= peer.failTimeout) continue;
      if (peer.maxConns && peer.conns >= peer.maxConns) continue;
      peer.currentWeight += peer.effectiveWeight;
      total += peer.effectiveWeight;
      if (peer.effectiveWeight < peer.weight) peer.effectiveWeight++;
      if (!best || peer.currentWeight > best.currentWeight) {
        best = peer;
        bestIndex = i;
      }
    }
    if (!best) return undefined;
    this.markTried(bestIndex);
    best.currentWeight -= total;
    if (now - best.checked > best.failTimeout) best.checked = now;
    return best;
  }

  /**
   * Ends the try on the current peer (ngx_http_upstream_free_round_robin_peer).
   * Returns true when a peer just became temporarily disabled (nginx logs a warning).
   */
  free(state: number): boolean {
    const peer = this.current;
    if (!peer) return false;
    this.current = undefined;
    peer.addConn(-1);
    if (this.list.single) {
      peer.fails = 0;
      this.tries = 0;
      return false;
    }
    let disabled = false;
    if (state === PEER_FAILED) {
      const now = nowSec();
      peer.fails++;
      peer.accessed = now;
      peer.checked = now;
      if (peer.maxFails) {
        peer.effectiveWeight -= Math.floor(peer.weight / peer.maxFails);
        if (peer.fails >= peer.maxFails) disabled = true;
      }
      if (peer.effectiveWeight < 0) peer.effectiveWeight = 0;
    } else if (peer.accessed < peer.checked) {
      // the peer answered after its fail_timeout: it is alive again
      peer.fails = 0;
    }
    if (this.tries) this.tries--;
    return disabled;
  }
}

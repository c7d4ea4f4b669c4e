/**
 * The per-try peer seam (nginx's ngx_peer_connection_t get/free): the engine
 * asks a chooser once per try where to connect, telling it how the previous
 * try ended, and tells it after every try how the peer did. The balancers of
 * round-robin.ts and balancers.ts are choosers; a module may bring its own
 * (a Lua balancer, a gateway's nodes that change at run time, a health
 * checker's view), see src/http/upstream/peer-choice.ts for how one is
 * installed.
 */
import type tls from 'node:tls';
import { addressName } from './address.ts';
import type { PeerAddress } from './address.ts';
import type { KeepalivePool } from './keepalive.ts';

/** Where one try connects. `addr.name` is `$upstream_addr` and the keepalive pool's key. */
export interface ChosenPeer {
  readonly addr: PeerAddress;
  /** The name logged and shown in `$upstream_addr` (a `Peer`'s is its address). */
  readonly name: string;
  /** Idle connections to reuse and keep, instead of the group's pool (a gateway upstream's `keepalive_pool`). */
  readonly pool?: KeepalivePool;
  /** TLS options over the location's for this peer (a gateway upstream's client certificate); its sessions are not reused. */
  readonly tls?: tls.ConnectionOptions;
}

export interface PeerChooser {
  /**
   * Tries left (nginx's pc->tries): the engine tries another peer only while
   * it is at least 1 after `free`, which counts it down as nginx's free
   * callbacks do. The engine lowers it to `*_next_upstream_tries`.
   */
  tries: number;
  /** Set by the engine to `*_next_upstream_tries` (0: no limit), for a chooser that adds tries (set_more_tries). */
  triesLimit?: number;
  /**
   * Set by the engine when the protocol can: builds the request head and body
   * again from the request as it is now, for this try and the next ones
   * (OpenResty's recreate_request, after ngx.req.set_body_data and the like).
   */
  recreateRequest?: () => void;
  /**
   * The peer for the next try, or undefined for none ("no live upstreams":
   * the client gets 502, or the last failure's status). `lastFailure` is how
   * the previous try ended — an NGX_HTTP_UPSTREAM_FT_* bit (FT in
   * src/http/upstream/conf.ts: ERROR, TIMEOUT, INVALID_HEADER, HTTP_502...),
   * 0 on the first try — and `lastStatus` the status it gave (502, 504, or
   * the upstream's own 5xx/4xx; 0 on the first try). A number is a status
   * the request ends with at once: the chooser itself failed (nginx's
   * NGX_ERROR from peer.get, a 500), nothing is logged by the engine.
   */
  get(lastFailure: number, lastStatus: number): ChosenPeer | undefined | number;
  /**
   * The try on the peer `get` returned is over (nginx's peer.free): PEER_OK,
   * PEER_FAILED or PEER_NEXT (round-robin.ts); count `tries` down here. True
   * when that made the peer temporarily unavailable (the engine logs nginx's
   * warning).
   */
  free(state: number): boolean;
}

/** A peer at an IP address and port given at run time (not from an `upstream {}` block). */
export function peerAt(ip: string, port: number): ChosenPeer {
  const name = addressName(ip, port);
  return { name, addr: { name, host: ip, port } };
}

/**
 * Which peer chooser a request's tries ask (nginx's peer.init and
 * init_upstream). By default the group's balancer (round robin, hash,
 * ip_hash, least_conn, random; backup peers, max_fails/fail_timeout,
 * resolved servers), or the one address of a `proxy_pass` to a host:port
 * without an `upstream {}` block. A module replaces it without touching the
 * engine, for one request (a phase handler, as balancer_by_lua's per-request
 * choice) or for every request to a group (a directive in `upstream {}`).
 */
import { createPicker } from '../../upstream/balancers.ts';
import type { UpstreamGroup } from '../../upstream/group.ts';
import type { PeerList } from '../../upstream/peer.ts';
import type { PeerChooser } from '../../upstream/peer-chooser.ts';
import { RoundRobinPicker } from '../../upstream/round-robin.ts';
import type { HttpRequest } from '../request.ts';
import type { ComplexValue } from '../../core/variables.ts';

/** Where a request goes once its target is known: the group (if any) and the peers to choose from. */
export interface Placement {
  group: UpstreamGroup | undefined;
  peers: PeerList;
}

/** Makes the chooser for one request; `place` is where the protocol's target points. */
export type PeerChooserFactory = (r: HttpRequest, place: Placement) => PeerChooser;

/** r.ctx key of a chooser installed for one request. */
const REQUEST_CHOOSER = {};
const groupChoosers = new WeakMap<UpstreamGroup, PeerChooserFactory>();

/** From a phase handler before content: this request's tries (every upstream it uses) ask `factory`'s chooser. */
export function usePeerChooser(r: HttpRequest, factory: PeerChooserFactory): void {
  r.ctx.set(REQUEST_CHOOSER, factory);
}

/** r.ctx key of timeouts set for one request. */
const REQUEST_TIMEOUTS = {};

/** Connect, send and read timeouts (ms) for one request's tries, as APISIX's balancer sets them per request. */
export interface UpstreamTimeouts { connectTimeout?: number; sendTimeout?: number; readTimeout?: number; nextUpstreamTimeout?: number }

/** From a phase handler before content: this request's tries use these timeouts instead of the location's. */
export function useUpstreamTimeouts(r: HttpRequest, t: UpstreamTimeouts): void {
  r.ctx.set(REQUEST_TIMEOUTS, t);
}

/** The location's upstream conf, with the request's own timeouts over it when it has some. */
export function withRequestTimeouts<C extends object>(r: HttpRequest, conf: C): C {
  const t = r.ctx.get(REQUEST_TIMEOUTS) as UpstreamTimeouts | undefined;
  return t ? Object.assign(Object.create(conf) as C, t) : conf;
}

/** From a directive in `upstream {}`: every request to `group` asks `factory`'s chooser. */
export function setGroupPeerChooser(group: UpstreamGroup, factory: PeerChooserFactory): void {
  groupChoosers.set(group, factory);
}

/** The group's balancer with its inputs evaluated for `r`, or round robin over the resolved addresses. */
export function defaultPeerChooser(r: HttpRequest, place: Placement): RoundRobinPicker {
  const g = place.group;
  if (!g || g.balancer.kind === 'round_robin') return new RoundRobinPicker(place.peers);
  const b = g.balancer;
  const key = b.kind === 'hash' ? (g.balanceKey as ComplexValue).evaluate(r) : '';
  return createPicker(b, place.peers, { clientAddress: r.remoteAddress, key }, g.ring);
}

/** The chooser for a request to `place`: the request's own, else its group's, else the default. */
export function peerChooserFor(r: HttpRequest, place: Placement): PeerChooser {
  const own = r.ctx.get(REQUEST_CHOOSER) as PeerChooserFactory | undefined;
  if (own) return own(r, place);
  const ofGroup = place.group && groupChoosers.get(place.group);
  return ofGroup ? ofGroup(r, place) : defaultPeerChooser(r, place);
}

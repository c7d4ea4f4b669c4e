/**
 * `type: ewma` (apisix/balancer/ewma.lua): each node's latency as an
 * exponentially weighted moving average, shared by the workers (APISIX's
 * `balancer-ewma` shared dicts; here the gateway's shared table), decaying
 * with a 10 s time constant: a sample of `rtt` seconds taken `td` seconds
 * after the last one weighs 1 − e^(−td/10), and the score read at pick time
 * is the average decayed to now (towards 0, so an idle node gets tried
 * again). A pick takes two distinct random candidates not tried yet and
 * keeps the lower score (power of two choices); the log phase adds the
 * request's `upstream_connect_time + upstream_response_time`.
 */
import { peekSlot, withSlot } from './counters.ts';

const DECAY_SECONDS = 10;

const keyOf = (node: string): string => `ewma\0${node}`;

function decayed(ewma: number, lastSeconds: number, rtt: number, nowSeconds: number): number {
  const weight = Math.exp(-Math.max(nowSeconds - lastSeconds, 0) / DECAY_SECONDS);
  return ewma * weight + rtt * (1 - weight);
}

/** The node's score now (its average decayed to now; 0 for a node never measured). */
export function ewmaScore(node: string): number {
  return peekSlot(keyOf(node), (f, v) => decayed(f[v], f[v + 1], 0, Date.now() / 1000)) ?? 0;
}

/** Adds a sample of `rtt` seconds to the node's average. */
export function ewmaUpdate(node: string, rtt: number): void {
  withSlot(keyOf(node), (f, v, now) => {
    f[v] = decayed(f[v], f[v + 1], rtt, now / 1000);
    f[v + 1] = now / 1000;
  });
}

/** Two random candidates, the lower score wins; one candidate is the answer. */
export function ewmaPick<N extends { name: string }>(candidates: N[]): N | undefined {
  if (candidates.length <= 1) return candidates[0];
  const a = Math.floor(Math.random() * candidates.length);
  let b = Math.floor(Math.random() * (candidates.length - 1));
  if (b >= a) b++;
  return ewmaScore(candidates[a].name) > ewmaScore(candidates[b].name) ? candidates[b] : candidates[a];
}

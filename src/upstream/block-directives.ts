/**
 * Directives of an `upstream {}` block that http and stream read the same
 * way: `zone name [size]` and the balancing methods' arguments (`hash key
 * [consistent]`, `random [two [least_conn]]`), with nginx's messages. Each
 * protocol compiles the hash key with its own variables.
 */
import type { ConfContext } from '../conf/context.ts';
import { parseSize } from '../conf/values.ts';
import type { Balancer } from './balancers.ts';
import type { UpstreamGroup } from './group.ts';

/** `zone name [size]` of group `g` (ngx_*_upstream_zone). */
export function readZone(cf: ConfContext, g: UpstreamGroup, args: string[]): void {
  const [name, size] = args;
  if (!name) throw cf.error(`invalid zone name "${name}"`);
  let bytes = 0;
  if (size !== undefined) {
    bytes = parseSize(size);
    if (Number.isNaN(bytes)) throw cf.error(`invalid zone size "${size}"`);
    if (bytes < 8 * 4096) throw cf.error(`zone "${name}" is too small`);
  }
  g.zone = { name, size: bytes };
}

/** The balancer `hash`, `least_conn`, `random` or `ip_hash` with `args` (the hash key is args[0], compiled by the caller). */
export function readBalancer(cf: ConfContext, kind: Balancer['kind'], args: string[]): Balancer {
  if (kind === 'hash') {
    if (args[1] !== undefined && args[1] !== 'consistent') throw cf.error(`invalid parameter "${args[1]}"`);
    return { kind: 'hash', consistent: args[1] === 'consistent' };
  }
  if (kind === 'random') {
    if (args[0] !== undefined && args[0] !== 'two') throw cf.error(`invalid parameter "${args[0]}"`);
    if (args[1] !== undefined && args[1] !== 'least_conn') throw cf.error(`invalid parameter "${args[1]}"`);
    return { kind: 'random', two: args[0] === 'two' };
  }
  return kind === 'ip_hash' ? { kind } : { kind: 'least_conn' };
}

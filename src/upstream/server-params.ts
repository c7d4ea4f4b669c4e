/**
 * The parameters of an upstream block's `server` directive, shared by the
 * http and stream upstream modules (weight=, max_conns=, max_fails=,
 * fail_timeout=, backup, down, and for http resolve and service=).
 */
import type { ConfContext } from '../conf/context.ts';
import { parseNumber, parseTime } from '../conf/values.ts';
import type { UpstreamGroup } from './group.ts';

export interface ServerParams {
  weight: number;
  maxConns: number;
  maxFails: number;
  /** Seconds (nginx parses fail_timeout in seconds: `500ms` is invalid). */
  failTimeout: number;
  backup: boolean;
  down: boolean;
  resolve: boolean;
  service: string | undefined;
}

/** Parses `args` (after the address); `resolvable` allows `resolve` and `service=`. */
export function parseServerParams(cf: ConfContext, args: string[], group: UpstreamGroup, resolvable: boolean): ServerParams {
  const p: ServerParams = { weight: 1, maxConns: 0, maxFails: 1, failTimeout: 10, backup: false, down: false, resolve: false, service: undefined };
  for (const v of args) {
    const invalid = () => cf.error(`invalid parameter "${v}"`);
    if (v.startsWith('weight=')) {
      p.weight = parseNumber(v.slice(7));
      if (!(p.weight > 0)) throw invalid();
    } else if (v.startsWith('max_conns=')) {
      p.maxConns = parseNumber(v.slice(10));
      if (Number.isNaN(p.maxConns)) throw invalid();
    } else if (v.startsWith('max_fails=')) {
      p.maxFails = parseNumber(v.slice(10));
      if (Number.isNaN(p.maxFails)) throw invalid();
    } else if (v.startsWith('fail_timeout=')) {
      p.failTimeout = parseTime(v.slice(13), true);
      if (Number.isNaN(p.failTimeout)) throw invalid();
    } else if (v === 'backup') {
      const b = group.balancer.kind;
      if (b === 'ip_hash' || b === 'hash' || b === 'random') throw cf.error(`balancing method does not support parameter "${v}"`);
      p.backup = true;
    } else if (v === 'down') {
      p.down = true;
    } else if (resolvable && v === 'resolve') {
      p.resolve = true;
    } else if (resolvable && v.startsWith('service=')) {
      p.service = v.slice(8);
      if (!p.service) throw cf.error('service is empty');
    } else {
      throw invalid();
    }
  }
  return p;
}

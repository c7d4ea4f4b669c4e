/**
 * limit-req (apisix/plugins/limit-req.lua), local policy: a leaky bucket of
 * `rate` requests per second per key (the variable `key` names; with
 * `var_combination`, `$a $b`), shared by the workers. A request beyond
 * `burst` is refused with `rejected_code` (503; `{"error_msg":
 * rejected_msg}` when set); one within it waits until the bucket lets it
 * through, unless `nodelay`. The wait comes after the access phase's other
 * plugins (APISIX sleeps in the middle of it).
 */
import { leakyBucket } from '../dataplane/counters.ts';
import { confVersion, limitKeyValue } from './limit-key.ts';
import type { GatewayPlugin } from './registry.ts';

interface LimitReqConf { rate: number; burst: number; key: string; key_type: string; rejected_code: number; rejected_msg?: string; nodelay: boolean }

export const limitReq: GatewayPlugin<LimitReqConf> = {
  name: 'limit-req', version: 0.1, priority: 1001,
  schema: {
    type: 'object',
    properties: {
      rate: { type: 'number', exclusiveMinimum: 0 },
      burst: { type: 'number', minimum: 0 },
      key: { type: 'string' },
      key_type: { type: 'string', enum: ['var', 'var_combination'], default: 'var' },
      rejected_code: { type: 'integer', minimum: 200, maximum: 599, default: 503 },
      rejected_msg: { type: 'string', minLength: 1 },
      nodelay: { type: 'boolean', default: false },
      allow_degradation: { type: 'boolean', default: false },
      policy: { type: 'string', enum: ['redis', 'redis-cluster', 'local'], default: 'local' },
    },
    required: ['rate', 'burst', 'key'],
  },
  access(conf, ctx) {
    const excess = leakyBucket(`limit-req:${ctx.routeKey}:${confVersion(conf)}:${limitKeyValue(conf, ctx)}`, conf.rate, conf.burst);
    if (excess < 0) return conf.rejected_msg !== undefined ? { status: conf.rejected_code, body: { error_msg: conf.rejected_msg } } : { status: conf.rejected_code };
    const delayMs = (excess / conf.rate) * 1000;
    if (delayMs >= 1 && !conf.nodelay) ctx.delay(delayMs);
    return undefined;
  },
};

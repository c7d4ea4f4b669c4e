/**
 * limit-count (apisix/plugins/limit-count/init.lua), local policy: `count`
 * requests per fixed `time_window` seconds per key (the variable `key`
 * names, the client address when it is empty), counted per route and
 * version of the plugin's conf (a change of it starts again; or per
 * `group`). Over the limit: `rejected_code` (503), with `{"error_msg":
 * rejected_msg}` when there is one; X-RateLimit-Limit/-Remaining/-Reset (or
 * the plugin metadata's names) on every answer unless `show_limit_quota_header` is false. The counters are
 * shared by every worker (APISIX's shared dict), src/gateway/dataplane/counters.ts.
 */
import { countHit } from '../dataplane/counters.ts';
import { confVersion, limitKeyValue } from './limit-key.ts';
import type { PluginContext } from './phase-api.ts';
import type { GatewayPlugin } from './registry.ts';

interface LimitCountConf {
  count: number; time_window: number; group?: string; key: string; key_type: string;
  rejected_code: number; rejected_msg?: string; show_limit_quota_header: boolean;
}

function limitKey(conf: LimitCountConf, ctx: PluginContext): string {
  const scope = conf.group !== undefined ? conf.group : `${ctx.routeKey}:${confVersion(conf)}`;
  return `limit-count:${scope}:${limitKeyValue(conf, ctx)}`;
}

export const limitCount: GatewayPlugin<LimitCountConf> = {
  name: 'limit-count', version: 0.5, priority: 1002,
  schema: {
    type: 'object',
    properties: {
      count: { type: 'integer', exclusiveMinimum: 0 },
      time_window: { type: 'integer', exclusiveMinimum: 0 },
      group: { type: 'string' },
      key: { type: 'string', default: 'remote_addr' },
      key_type: { type: 'string', enum: ['var', 'var_combination', 'constant'], default: 'var' },
      rejected_code: { type: 'integer', minimum: 200, maximum: 599, default: 503 },
      rejected_msg: { type: 'string', minLength: 1 },
      policy: { type: 'string', enum: ['local', 'redis', 'redis-cluster'], default: 'local' },
      allow_degradation: { type: 'boolean', default: false },
      show_limit_quota_header: { type: 'boolean', default: true },
    },
    // APISIX's schema: count and time_window, or `rules`; Gatehouse does not run `rules` yet, so they are refused
    oneOf: [{ required: ['count', 'time_window'] }, { required: ['rules'] }],
    not: { required: ['rules'] },
  },
  metadataSchema: {
    type: 'object',
    properties: {
      limit_header: { type: 'string', default: 'X-RateLimit-Limit' },
      remaining_header: { type: 'string', default: 'X-RateLimit-Remaining' },
      reset_header: { type: 'string', default: 'X-RateLimit-Reset' },
    },
  },
  access(conf, ctx) {
    const hit = countHit(limitKey(conf, ctx), conf.time_window * 1000, conf.count);
    // the hit that opens a window says the whole window, later ones what is left (to 1/100 s)
    const reset = hit.leftMs < 0 ? conf.time_window : Math.floor(hit.leftMs / 10) / 100;
    const remaining = conf.count - hit.used - 1;
    if (conf.show_limit_quota_header) {
      // the header names: the plugin metadata's, else APISIX's defaults
      const names = ctx.pluginMetadata('limit-count') as { limit_header?: string; remaining_header?: string; reset_header?: string } | undefined;
      ctx.setResponseHeader(names?.limit_header ?? 'X-RateLimit-Limit', String(conf.count));
      ctx.setResponseHeader(names?.remaining_header ?? 'X-RateLimit-Remaining', String(Math.max(remaining, 0)));
      ctx.setResponseHeader(names?.reset_header ?? 'X-RateLimit-Reset', String(reset));
    }
    if (remaining < 0) return conf.rejected_msg !== undefined ? { status: conf.rejected_code, body: { error_msg: conf.rejected_msg } } : { status: conf.rejected_code };
    return undefined;
  },
};

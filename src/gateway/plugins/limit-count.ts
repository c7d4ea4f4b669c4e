/**
 * limit-count (apisix/plugins/limit-count/init.lua), local policy: `count`
 * requests per fixed `time_window` seconds per key (the variable `key`
 * names, the client address when it is empty), counted per route and
 * version of the plugin's conf (a change of it starts again; or per
 * `group`). Over the limit: `rejected_code` (503), with `{"error_msg":
 * rejected_msg}` when there is one; X-RateLimit-Limit/-Remaining/-Reset (or
 * the plugin metadata's names) on every answer unless `show_limit_quota_header` is false. The counters are
 * shared by every worker (APISIX's shared dict), src/gateway/dataplane/counters.ts. `count` and
 * `time_window` may be variables (`$http_x_count`), read per request; the confs of one `group`
 * must be the same. `rules`: a limit per rule whose key resolves, headers prefixed
 * (`X-1-RateLimit-Limit`). Not yet: the sliding window (counted as fixed), redis.
 */
import { countHit } from '../dataplane/counters.ts';
import { pluginLog } from './batch-processor.ts';
import { confVersion, INTEGER_OR_VAR, limitKeyValue, limitNumber, stableJson } from './limit-key.ts';
import type { PluginAnswer, PluginContext } from './phase-api.ts';
import { LIMIT_COUNT_POLICIES, POLICY_FIELDS } from './redis-schema.ts';
import type { GatewayPlugin } from './registry.ts';
import { resolveVar } from './resolve-var.ts';

interface LimitCountConf {
  count: number | string; time_window: number | string; group?: string; key: string; key_type: string;
  rejected_code: number; rejected_msg?: string; show_limit_quota_header: boolean; allow_degradation: boolean;
  policy: string; sync_interval: number; rules?: RuleConf[];
}
interface RuleConf { count: number | string; time_window: number | string; key: string; header_prefix?: string }
/** One limit as a request meets it: the numbers resolved, the key's value, the headers' prefix (rules only). */
interface Rule { count: number; window: number; key: string; prefix?: string }

const NO_DELAYED_SYNC = -1;

function limitKey(conf: LimitCountConf, ctx: PluginContext, key: string): string {
  const scope = conf.group !== undefined ? conf.group : `${ctx.routeKey}:${confVersion(conf)}`;
  return `limit-count:${scope}:${key}`;
}

/**
 * limit-count/init.lua's get_rules: the one limit of count/time_window, or each rule whose key
 * names a variable the request has (`${http_user}`; a `??` default counts), its key the
 * resolved text; or why a count or window is no positive integer.
 */
function rulesOf(conf: LimitCountConf, ctx: PluginContext): Rule[] | { error: string } {
  if (!conf.rules) {
    const count = limitNumber(conf.count, ctx);
    const window = limitNumber(conf.time_window, ctx);
    if (typeof count !== 'number') return count;
    if (typeof window !== 'number') return window;
    return [{ count, window, key: limitKeyValue(conf, ctx) }];
  }
  const rules: Rule[] = [];
  for (const [i, rule] of conf.rules.entries()) {
    let resolved = 0;
    // resolve_var's escaper runs once per variable that had a value: that is its n_resolved
    const key = resolveVar(rule.key, ctx, (v) => { resolved++; return v; });
    if (resolved === 0) continue;
    const count = limitNumber(rule.count, ctx);
    const window = limitNumber(rule.time_window, ctx);
    if (typeof count !== 'number') return count;
    if (typeof window !== 'number') return window;
    rules.push({ count, window, key, prefix: rule.header_prefix ?? String(i + 1) });
  }
  return rules;
}

/** One limit counted: its headers set, the rejection when it is over. */
function limitOne(conf: LimitCountConf, rule: Rule, ctx: PluginContext): PluginAnswer | undefined {
  const hit = countHit(limitKey(conf, ctx, rule.key), rule.window * 1000, rule.count);
  // the hit that opens a window says the whole window, later ones what is left (to 1/100 s)
  const reset = hit.leftMs < 0 ? rule.window : Math.floor(hit.leftMs / 10) / 100;
  const remaining = rule.count - hit.used - 1;
  if (conf.show_limit_quota_header) {
    // the header names: the plugin metadata's, else APISIX's defaults; a rule's prefix goes before `RateLimit-`
    const names = ctx.pluginMetadata('limit-count') as { limit_header?: string; remaining_header?: string; reset_header?: string } | undefined;
    const named = (n: string) => (rule.prefix === undefined ? n : n.replace('RateLimit-', `${rule.prefix}-RateLimit-`));
    ctx.setResponseHeader(named(names?.limit_header ?? 'X-RateLimit-Limit'), String(rule.count));
    ctx.setResponseHeader(named(names?.remaining_header ?? 'X-RateLimit-Remaining'), String(Math.max(remaining, 0)));
    ctx.setResponseHeader(named(names?.reset_header ?? 'X-RateLimit-Reset'), String(reset));
  }
  if (remaining >= 0) return undefined;
  return conf.rejected_msg !== undefined ? { status: conf.rejected_code, body: { error_msg: conf.rejected_msg } } : { status: conf.rejected_code };
}

const PROPERTIES = {
  count: INTEGER_OR_VAR(1),
  time_window: INTEGER_OR_VAR(1),
  window_type: { type: 'string', enum: ['fixed', 'sliding'], default: 'fixed' },
  rules: {
    type: 'array',
    items: {
      type: 'object',
      properties: { count: INTEGER_OR_VAR(1), time_window: INTEGER_OR_VAR(1), key: { type: 'string' }, header_prefix: { type: 'string' } },
      required: ['count', 'time_window', 'key'],
    },
  },
  group: { type: 'string' },
  key: { type: 'string', default: 'remote_addr' },
  key_type: { type: 'string', enum: ['var', 'var_combination', 'constant'], default: 'var' },
  rejected_code: { type: 'integer', minimum: 200, maximum: 599, default: 503 },
  rejected_msg: { type: 'string', minLength: 1 },
  policy: { type: 'string', enum: ['local', 'redis', 'redis-cluster', 'redis-sentinel'], default: 'local' },
  allow_degradation: { type: 'boolean', default: false },
  show_limit_quota_header: { type: 'boolean', default: true },
  sync_interval: { type: 'number', default: NO_DELAYED_SYNC },
};

/**
 * The first conf the Admin API checked for each group (APISIX's group_conf_lru): every route of a
 * group shares its counter, so their confs must be the same.
 */
const groups = new Map<string, LimitCountConf>();
const MAX_GROUPS = 512;

function groupMismatch(conf: LimitCountConf & { group: string }): boolean {
  const first = groups.get(conf.group);
  if (first === undefined) {
    if (groups.size >= MAX_GROUPS) groups.delete(groups.keys().next().value!);
    groups.set(conf.group, conf);
    return false;
  }
  // the schema's fields and the policy's (not the injected _meta)
  const fields = [...Object.keys(PROPERTIES), ...Object.keys(POLICY_FIELDS[conf.policy]?.properties ?? {})];
  const a = first as unknown as Record<string, unknown>;
  const b = conf as unknown as Record<string, unknown>;
  return fields.some((f) => stableJson(a[f]) !== stableJson(b[f]));
}

export const limitCount: GatewayPlugin<LimitCountConf> = {
  name: 'limit-count', version: 0.5, priority: 1002,
  schema: {
    type: 'object',
    properties: PROPERTIES,
    oneOf: [{ required: ['count', 'time_window'] }, { required: ['rules'] }],
    ...LIMIT_COUNT_POLICIES,
  },
  metadataSchema: {
    type: 'object',
    properties: {
      limit_header: { type: 'string', default: 'X-RateLimit-Limit' },
      remaining_header: { type: 'string', default: 'X-RateLimit-Remaining' },
      reset_header: { type: 'string', default: 'X-RateLimit-Reset' },
    },
  },
  // limit-count/init.lua's check_schema, after the schema
  // a conf with both forms fails the schema's oneOf: APISIX says why
  schemaMessage: (conf, err) => (err.includes('value should match only one schema') && (conf.count !== undefined || conf.time_window !== undefined) && conf.rules
    ? 'count/time_window and rules cannot be specified at the same time' : err),
  checkConf(conf) {
    if (conf.rules && (conf.count !== undefined || conf.time_window !== undefined)) return 'count/time_window and rules cannot be specified at the same time';
    if (conf.group !== undefined && conf.rules) return 'group and rules cannot be specified at the same time';
    // each rule's counter is keyed by its key alone: two rules with one key would count twice
    const keys = new Set<string>();
    for (const rule of conf.rules ?? []) {
      if (keys.has(rule.key)) return `duplicate key '${rule.key}' in rules`;
      keys.add(rule.key);
    }
    if (conf.group !== undefined && groupMismatch(conf as LimitCountConf & { group: string })) return 'group conf mismatched';
    if (conf.policy !== 'local' && conf.sync_interval !== NO_DELAYED_SYNC) {
      if (conf.sync_interval < 0.1) return 'sync_interval should not be smaller than 0.1';
      if (typeof conf.time_window === 'number' && conf.sync_interval >= conf.time_window) return 'sync_interval should be smaller than time_window';
    }
    return undefined;
  },
  access(conf, ctx) {
    // counts or windows given as variables are read per request; no limit that applies fails it
    const rules = rulesOf(conf, ctx);
    if (!Array.isArray(rules) || rules.length === 0) {
      pluginLog().error(`failed to get rate limit rules: ${Array.isArray(rules) ? 'no rule applies' : rules.error}`);
      return conf.allow_degradation ? undefined : { status: 500 };
    }
    for (const rule of rules) {
      const rejected = limitOne(conf, rule, ctx);
      if (rejected) return rejected;
    }
    return undefined;
  },
};

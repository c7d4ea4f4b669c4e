/**
 * limit-conn (apisix/plugins/limit-conn/init.lua), local policy: requests
 * in flight per key, counted by every worker together. Beyond `conn` +
 * `burst`: `rejected_code` (503; `{"error_msg": rejected_msg}` when set);
 * beyond `conn`: the request waits `default_conn_delay` × how many times
 * over `conn` it is (or just `default_conn_delay` with
 * `only_use_default_delay`); the count drops when the request is over (log
 * phase). `conn` and `burst` may be variables (`$http_x_conn`), read per
 * request; `rules`: a limit per rule whose key resolves. Not yet: redis.
 */
import { addToCount } from '../dataplane/counters.ts';
import { pluginLog } from './batch-processor.ts';
import { INTEGER_OR_VAR, limitKeyValue, limitNumber } from './limit-key.ts';
import type { PluginContext } from './phase-api.ts';
import { LIMIT_CONN_POLICIES } from './redis-schema.ts';
import type { GatewayPlugin } from './registry.ts';
import { resolveVar } from './resolve-var.ts';

interface LimitConnConf {
  conn: number | string; burst: number | string; default_conn_delay: number; only_use_default_delay: boolean;
  key: string; key_type: string; rejected_code: number; rejected_msg?: string; allow_degradation: boolean;
  rules?: Array<{ conn: number | string; burst: number | string; key: string }>;
}

interface Rule { conn: number; burst: number; key: string }

/**
 * limit-conn/init.lua's get_rules: the one limit of conn/burst, or each rule whose numbers
 * resolve and whose key names a variable the request has (its key the resolved text); or why
 * conn or burst is no whole number.
 */
function rulesOf(conf: LimitConnConf, ctx: PluginContext): Rule[] | { error: string } {
  if (!conf.rules) {
    const conn = limitNumber(conf.conn, ctx);
    const burst = limitNumber(conf.burst, ctx, true);
    if (typeof conn !== 'number') return conn;
    if (typeof burst !== 'number') return burst;
    return [{ conn, burst, key: limitKeyValue(conf, ctx) }];
  }
  const rules: Rule[] = [];
  for (const rule of conf.rules) {
    const conn = limitNumber(rule.conn, ctx);
    const burst = limitNumber(rule.burst, ctx, true);
    let resolved = 0;
    // resolve_var's escaper runs once per variable that had a value: that is its n_resolved
    const key = resolveVar(rule.key, ctx, (v) => { resolved++; return v; });
    if (typeof conn === 'number' && typeof burst === 'number' && resolved > 0) rules.push({ conn, burst, key });
  }
  return rules;
}

/** Per request: the counter keys this plugin took a place on. */
const TAKEN = {};

export const limitConn: GatewayPlugin<LimitConnConf> = {
  name: 'limit-conn', version: 0.1, priority: 1003,
  schema: {
    type: 'object',
    properties: {
      conn: INTEGER_OR_VAR(1),
      burst: INTEGER_OR_VAR(0),
      default_conn_delay: { type: 'number', exclusiveMinimum: 0 },
      only_use_default_delay: { type: 'boolean', default: false },
      key_type: { type: 'string', enum: ['var', 'var_combination'], default: 'var' },
      key: { type: 'string' },
      rejected_code: { type: 'integer', minimum: 200, maximum: 599, default: 503 },
      rejected_msg: { type: 'string', minLength: 1 },
      allow_degradation: { type: 'boolean', default: false },
      policy: { type: 'string', enum: ['redis', 'redis-cluster', 'local'], default: 'local' },
      rules: {
        type: 'array',
        items: {
          type: 'object',
          properties: { conn: INTEGER_OR_VAR(1), burst: INTEGER_OR_VAR(0), key: { type: 'string' } },
          required: ['conn', 'burst', 'key'],
        },
      },
    },
    oneOf: [{ required: ['conn', 'burst', 'default_conn_delay', 'key'] }, { required: ['default_conn_delay', 'rules'] }],
    ...LIMIT_CONN_POLICIES,
  },
  access(conf, ctx) {
    // conn and burst given as variables are read per request; no limit that applies fails it
    const rules = rulesOf(conf, ctx);
    if (!Array.isArray(rules) || rules.length === 0) {
      pluginLog().error(`failed to get limit conn rules: ${Array.isArray(rules) ? 'no rule applies' : rules.error}`);
      return conf.allow_degradation ? undefined : { status: 500 };
    }
    for (const rule of rules) {
      const key = `limit-conn:${ctx.routeKey}:${rule.conn}/${rule.burst}:${rule.key}`;
      const n = addToCount(key, 1);
      if (n > rule.conn + rule.burst) {
        addToCount(key, -1);
        return conf.rejected_msg !== undefined ? { status: conf.rejected_code, body: { error_msg: conf.rejected_msg } } : { status: conf.rejected_code };
      }
      // a global rule's limit-conn, the route's and each rule take one: all are given back
      const taken = (ctx.state.get(TAKEN) as string[] | undefined) ?? [];
      taken.push(key);
      ctx.state.set(TAKEN, taken);
      if (n > rule.conn) {
        const times = conf.only_use_default_delay ? 1 : Math.floor((n - 1) / rule.conn);
        ctx.delay(conf.default_conn_delay * times * 1000);
      }
    }
    return undefined;
  },
  log(_conf, ctx) {
    const taken = ctx.state.get(TAKEN) as string[] | undefined;
    if (taken === undefined) return;
    ctx.state.delete(TAKEN);
    for (const key of taken) addToCount(key, -1);
  },
};

/**
 * limit-conn (apisix/plugins/limit-conn/init.lua), local policy: requests
 * in flight per key, counted by every worker together. Beyond `conn` +
 * `burst`: `rejected_code` (503; `{"error_msg": rejected_msg}` when set);
 * beyond `conn`: the request waits `default_conn_delay` × how many times
 * over `conn` it is (or just `default_conn_delay` with
 * `only_use_default_delay`); the count drops when the request is over (log
 * phase).
 */
import { addToCount } from '../dataplane/counters.ts';
import { limitKeyValue } from './limit-key.ts';
import type { GatewayPlugin } from './registry.ts';

interface LimitConnConf {
  conn: number; burst: number; default_conn_delay: number; only_use_default_delay: boolean;
  key: string; key_type: string; rejected_code: number; rejected_msg?: string;
}

/** Per request: the counter key this plugin took a place on. */
const TAKEN = {};

export const limitConn: GatewayPlugin<LimitConnConf> = {
  name: 'limit-conn', version: 0.1, priority: 1003,
  schema: {
    type: 'object',
    properties: {
      conn: { type: 'integer', exclusiveMinimum: 0 },
      burst: { type: 'integer', minimum: 0 },
      default_conn_delay: { type: 'number', exclusiveMinimum: 0 },
      only_use_default_delay: { type: 'boolean', default: false },
      key_type: { type: 'string', enum: ['var', 'var_combination'], default: 'var' },
      key: { type: 'string' },
      rejected_code: { type: 'integer', minimum: 200, maximum: 599, default: 503 },
      rejected_msg: { type: 'string', minLength: 1 },
      allow_degradation: { type: 'boolean', default: false },
      policy: { type: 'string', enum: ['redis', 'redis-cluster', 'local'], default: 'local' },
    },
    required: ['conn', 'burst', 'default_conn_delay', 'key'],
  },
  access(conf, ctx) {
    const key = `limit-conn:${ctx.routeKey}:${conf.conn}/${conf.burst}:${limitKeyValue(conf, ctx)}`;
    const n = addToCount(key, 1);
    if (n > conf.conn + conf.burst) {
      addToCount(key, -1);
      return conf.rejected_msg !== undefined ? { status: conf.rejected_code, body: { error_msg: conf.rejected_msg } } : { status: conf.rejected_code };
    }
    // a global rule's limit-conn and the route's each take one: both are given back
    const taken = (ctx.state.get(TAKEN) as string[] | undefined) ?? [];
    taken.push(key);
    ctx.state.set(TAKEN, taken);
    if (n > conf.conn) {
      const times = conf.only_use_default_delay ? 1 : Math.floor((n - 1) / conf.conn);
      ctx.delay(conf.default_conn_delay * times * 1000);
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

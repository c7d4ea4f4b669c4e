/**
 * limit-conn (apisix/plugins/limit-conn/init.lua), local policy: requests
 * in flight per key, counted by every worker together. Beyond `conn` +
 * `burst`: `rejected_code` (503; `{"error_msg": rejected_msg}` when set);
 * beyond `conn`: the request waits `default_conn_delay` × how many times
 * over `conn` it is (or just `default_conn_delay` with
 * `only_use_default_delay`); the count drops when the request is over (log
 * phase). `conn` and `burst` may be variables (`$http_x_conn`), read per
 * request. Not yet: `rules`, redis.
 */
import { addToCount } from '../dataplane/counters.ts';
import { pluginLog } from './batch-processor.ts';
import { INTEGER_OR_VAR, limitKeyValue, limitNumber } from './limit-key.ts';
import type { GatewayPlugin } from './registry.ts';

interface LimitConnConf {
  conn: number | string; burst: number | string; default_conn_delay: number; only_use_default_delay: boolean;
  key: string; key_type: string; rejected_code: number; rejected_msg?: string; allow_degradation: boolean; rules?: unknown[];
}

/** Per request: the counter key this plugin took a place on. */
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
  },
  // Gatehouse does not run `rules` yet
  checkConf: (conf) => (conf.rules ? 'rules are not supported by Gatehouse yet' : undefined),
  access(conf, ctx) {
    // conn and burst given as variables are read per request; one that is no whole number fails it
    const conn = limitNumber(conf.conn, ctx);
    const burst = limitNumber(conf.burst, ctx, true);
    if (typeof conn !== 'number' || typeof burst !== 'number') {
      pluginLog().error(`failed to get limit conn rules: ${(typeof conn === 'number' ? burst as { error: string } : conn).error}`);
      return conf.allow_degradation ? undefined : { status: 500 };
    }
    const key = `limit-conn:${ctx.routeKey}:${conn}/${burst}:${limitKeyValue(conf, ctx)}`;
    const n = addToCount(key, 1);
    if (n > conn + burst) {
      addToCount(key, -1);
      return conf.rejected_msg !== undefined ? { status: conf.rejected_code, body: { error_msg: conf.rejected_msg } } : { status: conf.rejected_code };
    }
    // a global rule's limit-conn and the route's each take one: both are given back
    const taken = (ctx.state.get(TAKEN) as string[] | undefined) ?? [];
    taken.push(key);
    ctx.state.set(TAKEN, taken);
    if (n > conn) {
      const times = conf.only_use_default_delay ? 1 : Math.floor((n - 1) / conn);
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

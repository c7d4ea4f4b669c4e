/**
 * apisix/utils/redis-schema.lua: the fields the limiters' redis policies
 * require, as their schemas' if/then/else checks them. Gatehouse counts
 * locally whatever the policy (docs/gateway.md), so these only check a conf
 * as APISIX's Admin API does.
 */
import type { Schema } from '../schema/validate.ts';

const KEEPALIVE = {
  redis_keepalive_timeout: { type: 'integer', minimum: 1000, default: 10000 },
  redis_keepalive_pool: { type: 'integer', minimum: 1, default: 100 },
};

const REDIS: Schema = {
  properties: {
    redis_host: { type: 'string', minLength: 2 },
    redis_port: { type: 'integer', minimum: 1, default: 6379 },
    redis_username: { type: 'string', minLength: 1 },
    redis_password: { type: 'string', minLength: 0 },
    redis_database: { type: 'integer', minimum: 0, default: 0 },
    redis_timeout: { type: 'integer', minimum: 1, default: 1000 },
    redis_ssl: { type: 'boolean', default: false },
    redis_ssl_verify: { type: 'boolean', default: false },
    ...KEEPALIVE,
  },
  required: ['redis_host'],
};

const REDIS_CLUSTER: Schema = {
  properties: {
    redis_cluster_nodes: { type: 'array', minItems: 1, items: { type: 'string', minLength: 2, maxLength: 100 } },
    redis_password: { type: 'string', minLength: 0 },
    redis_timeout: { type: 'integer', minimum: 1, default: 1000 },
    redis_cluster_name: { type: 'string' },
    redis_cluster_ssl: { type: 'boolean', default: false },
    redis_cluster_ssl_verify: { type: 'boolean', default: false },
    ...KEEPALIVE,
  },
  required: ['redis_cluster_nodes', 'redis_cluster_name'],
};

/** limit-count's redis-sentinel policy (limit-count/init.lua). */
const REDIS_SENTINEL: Schema = {
  properties: {
    redis_sentinels: {
      type: 'array', minItems: 1,
      items: {
        type: 'object', additionalProperties: false, required: ['host', 'port'],
        properties: { host: { type: 'string', minLength: 2 }, port: { type: 'integer', minimum: 1, maximum: 65535 } },
      },
    },
    redis_master_name: { type: 'string', minLength: 1 },
    redis_role: { type: 'string', enum: ['master', 'slave'], default: 'master' },
    redis_connect_timeout: { type: 'integer', minimum: 1, default: 1000 },
    redis_read_timeout: { type: 'integer', minimum: 1, default: 1000 },
    redis_keepalive_timeout: { type: 'integer', minimum: 1, default: 60000 },
    redis_database: { type: 'integer', minimum: 0, default: 0 },
    redis_username: { type: 'string', minLength: 1 },
    redis_password: { type: 'string', minLength: 0 },
    sentinel_username: { type: 'string', minLength: 1 },
    sentinel_password: { type: 'string', minLength: 0 },
  },
  required: ['redis_sentinels', 'redis_master_name'],
};

/** Each policy's extra fields, by policy (limit-count's group check compares them too). */
export const POLICY_FIELDS: Record<string, Schema> = { redis: REDIS, 'redis-cluster': REDIS_CLUSTER, 'redis-sentinel': REDIS_SENTINEL };

// `required`: an absent policy is the default `local` (APISIX's validator fills defaults in as it goes; ours checks the conf as given)
const when = (policy: string) => ({ required: ['policy'], properties: { policy: { enum: [policy] } } });
const withKeyTtl = (s: Schema): Schema => ({ ...s, properties: { ...(s.properties as object), key_ttl: { type: 'integer', default: 3600 } } });

/** limit-count's if/then/else on `policy`. */
export const LIMIT_COUNT_POLICIES = {
  if: when('redis'), then: REDIS,
  else: { if: when('redis-cluster'), then: REDIS_CLUSTER, else: { if: when('redis-sentinel'), then: REDIS_SENTINEL } },
};

/** limit-conn's, whose redis confs also take `key_ttl`. */
export const LIMIT_CONN_POLICIES = {
  if: when('redis'), then: withKeyTtl(REDIS),
  else: { if: when('redis-cluster'), then: withKeyTtl(REDIS_CLUSTER) },
};

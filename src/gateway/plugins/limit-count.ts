/** limit-count (apisix/plugins/limit-count/init.lua), local policy: name, priority and schema. */
import type { GatewayPlugin } from './registry.ts';

export const limitCount: GatewayPlugin = {
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
    required: ['count', 'time_window'],
  },
};

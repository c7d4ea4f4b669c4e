/** gzip (apisix/plugins/gzip.lua): name, priority and schema; compression is the data plane's. */
import type { GatewayPlugin } from './registry.ts';

export const gzip: GatewayPlugin = {
  name: 'gzip', version: 0.1, priority: 995,
  schema: {
    type: 'object',
    properties: {
      types: {
        anyOf: [
          { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } },
          { enum: ['*'] },
        ],
        default: ['text/html'],
      },
      min_length: { type: 'integer', minimum: 1, default: 20 },
      comp_level: { type: 'integer', minimum: 1, maximum: 9, default: 1 },
      http_version: { enum: [1.1, 1.0], default: 1.1 },
      buffers: {
        type: 'object',
        properties: {
          number: { type: 'integer', minimum: 1, default: 32 },
          size: { type: 'integer', minimum: 1, default: 4096 },
        },
        default: { number: 32, size: 4096 },
      },
      vary: { type: 'boolean' },
    },
  },
};

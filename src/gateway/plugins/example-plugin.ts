/**
 * example-plugin (apisix/plugins/example-plugin.lua): APISIX's sample
 * plugin, which its own Admin API tests use for plugin metadata and the
 * `/plugins/{name}` views. It changes nothing on the request path.
 */
import type { GatewayPlugin } from './registry.ts';

export const examplePlugin: GatewayPlugin = {
  name: 'example-plugin', version: 0.1, priority: 0,
  schema: {
    type: 'object',
    properties: {
      i: { type: 'number', minimum: 0 },
      s: { type: 'string' },
      t: { type: 'array', minItems: 1 },
      ip: { type: 'string' },
      port: { type: 'integer' },
    },
    required: ['i'],
  },
  metadataSchema: {
    type: 'object',
    properties: {
      ikey: { type: 'number', minimum: 0 },
      skey: { type: 'string' },
    },
    required: ['ikey', 'skey'],
  },
};

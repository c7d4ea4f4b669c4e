/** key-auth (apisix/plugins/key-auth.lua): name, priority and schemas; the request handling is the data plane's. */
import type { GatewayPlugin } from './registry.ts';

export const keyAuth: GatewayPlugin = {
  name: 'key-auth', version: 0.1, priority: 2500, type: 'auth',
  schema: {
    type: 'object',
    properties: {
      header: { type: 'string', default: 'apikey' },
      query: { type: 'string', default: 'apikey' },
      hide_credentials: { type: 'boolean', default: false },
      realm: { type: 'string', pattern: '^[\\x20-\\x21\\x23-\\x5B\\]-\\x7E]+$', default: 'key', minLength: 1, maxLength: 128 },
      anonymous_consumer: { type: 'string', minLength: 1 },
    },
  },
  consumerSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
  encryptFields: ['key'],
  consumerKeyField: 'key',
};

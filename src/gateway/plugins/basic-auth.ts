/** basic-auth (apisix/plugins/basic-auth.lua): name, priority and schemas; the request handling is the data plane's. */
import type { GatewayPlugin } from './registry.ts';

export const basicAuth: GatewayPlugin = {
  name: 'basic-auth', version: 0.1, priority: 2520, type: 'auth',
  schema: {
    type: 'object',
    properties: {
      hide_credentials: { type: 'boolean', default: false },
      realm: { type: 'string', pattern: '^[\\x20-\\x21\\x23-\\x5B\\]-\\x7E]+$', default: 'basic', minLength: 1, maxLength: 128 },
      anonymous_consumer: { type: 'string', minLength: 1 },
    },
  },
  consumerSchema: {
    type: 'object',
    title: 'work with consumer object',
    properties: { username: { type: 'string' }, password: { type: 'string' } },
    required: ['username', 'password'],
  },
  encryptFields: ['password'],
  consumerKeyField: 'username',
};

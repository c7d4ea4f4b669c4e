/**
 * csrf (apisix/plugins/csrf.lua): schema only. The Admin API checks and
 * stores its confs (`key` encrypted at rest); the data plane does not issue
 * or check tokens, and refuses a request that would run it
 * (not-implemented.ts), so no route is left unprotected.
 */
import type { GatewayPlugin } from './registry.ts';
import { notImplemented } from './not-implemented.ts';

export const csrf: GatewayPlugin = {
  name: 'csrf', version: 0.1, priority: 2980,
  schema: {
    type: 'object',
    properties: {
      key: { description: 'use to generate csrf token', type: 'string' },
      expires: { description: 'expires time(s) for csrf token', type: 'integer', default: 7200 },
      name: { description: 'the csrf token name', type: 'string', default: 'apisix-csrf-token' },
    },
    required: ['key'],
  },
  encryptFields: ['key'],
  ...notImplemented('csrf'),
};

/**
 * ldap-auth (apisix/plugins/ldap-auth.lua): schemas only. The Admin API
 * checks route and consumer confs and refuses a consumer `user_dn` another
 * consumer has; the data plane does not bind to LDAP, and refuses a request
 * that would run it (not-implemented.ts), so a route is never left open.
 */
import type { GatewayPlugin } from './registry.ts';
import { notImplemented } from './not-implemented.ts';

export const ldapAuth: GatewayPlugin = {
  name: 'ldap-auth', version: 0.1, priority: 2540, type: 'auth',
  schema: {
    type: 'object',
    title: 'work with route or service object',
    properties: {
      base_dn: { type: 'string' },
      ldap_uri: { type: 'string' },
      use_tls: { type: 'boolean', default: false },
      tls_verify: { type: 'boolean', default: false },
      uid: { type: 'string', default: 'cn' },
      hide_credentials: { type: 'boolean', default: false },
      realm: { type: 'string', pattern: '^[\\x20-\\x21\\x23-\\x5B\\]-\\x7E]+$', default: 'ldap', minLength: 1, maxLength: 128 },
    },
    required: ['base_dn', 'ldap_uri'],
  },
  consumerSchema: {
    type: 'object',
    title: 'work with consumer object',
    properties: { user_dn: { type: 'string' } },
    required: ['user_dn'],
  },
  consumerKeyField: 'user_dn',
  ...notImplemented('ldap-auth'),
};

/**
 * ldap-auth-advanced (apisix/plugins/ldap-auth-advanced.lua): schemas
 * only. The Admin API checks route and consumer confs (`ldap_password` is
 * stored encrypted) and refuses a consumer `user_dn` another consumer has;
 * the data plane does not search or bind, and refuses a request that would
 * run it (not-implemented.ts), so a route is never left open.
 */
import type { GatewayPlugin } from './registry.ts';
import { notImplemented } from './not-implemented.ts';

/** RFC 4512 attribute description: a descriptor or numeric OID, then `;option`s. */
const ATTR_PATTERN = '^(?:[A-Za-z][A-Za-z0-9-]*|(?:0|[1-9][0-9]*)(?:\\.(?:0|[1-9][0-9]*))+)(?:;[A-Za-z0-9-]+)*$';

export const ldapAuthAdvanced: GatewayPlugin = {
  name: 'ldap-auth-advanced', version: 0.1, priority: 2541, type: 'auth',
  schema: {
    type: 'object',
    title: 'work with route or service object',
    properties: {
      ldap_uri: { type: 'string', minLength: 1, maxLength: 256 },
      use_ldaps: { type: 'boolean', default: false },
      use_starttls: { type: 'boolean', default: false },
      ssl_verify: { type: 'boolean', default: true },
      timeout: { type: 'integer', minimum: 1, maximum: 60000, default: 10000 },
      keepalive: { type: 'boolean', default: true },
      keepalive_timeout: { type: 'integer', minimum: 1000, default: 60000 },
      keepalive_pool_size: { type: 'integer', minimum: 1, default: 5 },
      keepalive_pool_name: { type: 'string', minLength: 1, maxLength: 256 },
      base_dn: { type: 'string', minLength: 1, maxLength: 4096 },
      attribute: { type: 'string', maxLength: 256, default: 'cn', pattern: ATTR_PATTERN },
      bind_dn: { type: 'string', minLength: 1, maxLength: 4096 },
      ldap_password: { type: 'string', minLength: 1, maxLength: 4096 },
      size_limit: { type: 'integer', minimum: 2, default: 2 },
      time_limit: { type: 'integer', minimum: 0, default: 5 },
      consumer_required: { type: 'boolean', default: true },
      header_type: { type: 'string', enum: ['ldap', 'basic'], default: 'ldap' },
      realm: { type: 'string', pattern: '^[\\x20-\\x21\\x23-\\x5B\\]-\\x7E]+$', default: 'ldap', minLength: 1, maxLength: 128 },
    },
    required: ['ldap_uri', 'base_dn'],
  },
  consumerSchema: {
    type: 'object',
    title: 'work with consumer object',
    properties: { user_dn: { type: 'string', minLength: 1, maxLength: 4096 } },
    required: ['user_dn'],
  },
  consumerKeyField: 'user_dn',
  ...notImplemented('ldap-auth-advanced'),
};

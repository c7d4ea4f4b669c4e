/**
 * node-status (apisix/plugins/node-status.lua): schema only. In APISIX the
 * plugin has no phase functions (a conf on a route changes nothing); what it
 * adds is the `/apisix/status` API, which the gateway does not serve. The
 * Admin API lists it and checks its (empty) conf.
 */
import type { GatewayPlugin } from './registry.ts';

export const nodeStatus: GatewayPlugin = {
  name: 'node-status', version: 0.1, priority: 1000,
  schema: { type: 'object' },
};

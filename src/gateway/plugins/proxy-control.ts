/**
 * proxy-control (apisix/plugins/proxy-control.lua), in the rewrite phase:
 * `request_buffering` false streams the request body upstream as it
 * arrives instead of reading it whole first (APISIX-Runtime's
 * set_proxy_request_buffering, which this engine has built in).
 */
import type { GatewayPlugin } from './registry.ts';

interface ProxyControlConf { request_buffering: boolean }

export const proxyControl: GatewayPlugin<ProxyControlConf> = {
  name: 'proxy-control', version: 0.1, priority: 21990,
  schema: {
    type: 'object',
    properties: { request_buffering: { type: 'boolean', default: true } },
  },
  rewrite(conf, ctx) {
    ctx.setRequestBuffering(conf.request_buffering);
    return undefined;
  },
};

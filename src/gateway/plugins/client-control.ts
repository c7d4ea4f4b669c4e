/**
 * client-control (apisix/plugins/client-control.lua), in the rewrite
 * phase: `max_body_size` bytes at most in the request body (0: no limit).
 * A Content-Length over it answers 413 at once; a body without one (chunked)
 * is a 413 when reading it goes over (APISIX-Runtime's
 * set_client_max_body_size, which this engine has built in).
 */
import type { GatewayPlugin } from './registry.ts';

interface ClientControlConf { max_body_size?: number }

export const clientControl: GatewayPlugin<ClientControlConf> = {
  name: 'client-control', version: 0.1, priority: 22000,
  schema: {
    type: 'object',
    properties: {
      max_body_size: { type: 'integer', minimum: 0, description: 'Maximum message body size in bytes. No restriction when set to 0.' },
    },
  },
  rewrite(conf, ctx) {
    const max = conf.max_body_size;
    if (max === undefined) return undefined;
    const raw = ctx.header('content-length');
    const len = raw === undefined || raw.trim() === '' ? NaN : Number(raw);
    if (!Number.isNaN(len) && max !== 0 && len > max) return { status: 413 };
    ctx.setClientMaxBodySize(max);
    return undefined;
  },
};

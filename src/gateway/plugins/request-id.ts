/**
 * request-id (apisix/plugins/request-id.lua): a request without the
 * `header_name` header (X-Request-Id) gets one (a UUID), sent upstream and,
 * with `include_in_response`, on the answer unless the upstream gave its own.
 */
import crypto from 'node:crypto';
import type { GatewayPlugin } from './registry.ts';

interface RequestIdConf { header_name: string; include_in_response: boolean; algorithm: string }

const ID = {};

export const requestId: GatewayPlugin<RequestIdConf> = {
  name: 'request-id', version: 0.1, priority: 12015,
  schema: {
    type: 'object',
    properties: {
      header_name: { type: 'string', default: 'X-Request-Id' },
      include_in_response: { type: 'boolean', default: true },
      algorithm: { type: 'string', enum: ['uuid', 'nanoid', 'range_id'], default: 'uuid' },
      range_id: { type: 'object', properties: { length: { type: 'integer', minimum: 6, default: 16 }, char_set: { type: 'string', minLength: 6 } } },
    },
  },
  rewrite(conf, ctx) {
    let id = ctx.header(conf.header_name);
    if (id === undefined || id === '') {
      id = crypto.randomUUID();
      ctx.setRequestHeader(conf.header_name, id);
    }
    ctx.state.set(ID, id);
    return undefined;
  },
  headerFilter(conf, ctx) {
    if (!conf.include_in_response) return;
    const own = ctx.responseHeader(conf.header_name);
    if (own === undefined || own === '') ctx.setResponseHeader(conf.header_name, ctx.state.get(ID) as string);
  },
};

/**
 * gzip (apisix/plugins/gzip.lua): in the header filter, a response whose
 * media type is one of `types` (any with `*`; none without Content-Type),
 * not shorter than `min_length` when its length is known, to a request of
 * at least `http_version`, is compressed at `comp_level` by the engine's
 * gzip filter (so nginx's own conditions hold too: the client accepts
 * gzip, status 200/403/404, no Content-Encoding yet); `vary` adds
 * `Vary: Accept-Encoding`. `buffers` is accepted (the filter streams).
 */
import type { GatewayPlugin } from './registry.ts';

interface GzipConf { types: string[] | '*'; min_length: number; comp_level: number; http_version: number; vary?: boolean }

export const gzip: GatewayPlugin<GzipConf> = {
  name: 'gzip', version: 0.1, priority: 995,
  schema: {
    type: 'object',
    properties: {
      types: {
        anyOf: [
          { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } },
          { enum: ['*'] },
        ],
        default: ['text/html'],
      },
      min_length: { type: 'integer', minimum: 1, default: 20 },
      comp_level: { type: 'integer', minimum: 1, maximum: 9, default: 1 },
      http_version: { enum: [1.1, 1.0], default: 1.1 },
      buffers: {
        type: 'object',
        properties: {
          number: { type: 'integer', minimum: 1, default: 32 },
          size: { type: 'integer', minimum: 1, default: 4096 },
        },
        default: { number: 32, size: 4096 },
      },
      vary: { type: 'boolean' },
    },
  },
  headerFilter(conf, ctx) {
    let type = ctx.responseContentType;
    if (type === undefined) return;
    if (conf.types !== '*') {
      const semi = type.indexOf(';');
      if (semi >= 0) type = type.slice(0, semi);
      if (!conf.types.includes(type)) return;
    }
    const length = ctx.responseLength;
    if (length !== undefined && length < conf.min_length) return;
    if (ctx.httpVersion < conf.http_version) return;
    ctx.gzipLevel = conf.comp_level;
    if (conf.vary) ctx.addResponseHeader('Vary', 'Accept-Encoding');
  },
};

/**
 * gzip (apisix/plugins/gzip.lua): in the header filter, a response whose
 * media type is one of `types` (any with `*`; none without Content-Type),
 * not shorter than `min_length` when its length is known, to a request of
 * at least `http_version`, is compressed at `comp_level` by the engine's
 * gzip filter (so nginx's own conditions hold too: the client accepts
 * gzip, status 200/403/404, no Content-Encoding yet); `vary` adds
 * `Vary: Accept-Encoding`. `buffers` is accepted (the filter streams).
 */
import type { PluginContext } from './phase-api.ts';
import type { GatewayPlugin } from './registry.ts';

interface GzipConf { types: string[] | '*'; min_length: number; comp_level: number; http_version: number; vary?: boolean }

/** The `types` of gzip's and brotli's schemas: a list of media types, or `*`. */
export const COMPRESS_TYPES = {
  anyOf: [
    { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } },
    { enum: ['*'] },
  ],
  default: ['text/html'],
};

/** What gzip and brotli check of the response: its media type in `types`, not under `min_length`, the request's HTTP version. */
export function compressible(conf: { types: string[] | '*'; min_length: number; http_version: number }, ctx: PluginContext): boolean {
  let type = ctx.responseContentType;
  if (type === undefined) return false;
  if (conf.types !== '*') {
    const semi = type.indexOf(';');
    if (semi >= 0) type = type.slice(0, semi);
    if (!conf.types.includes(type)) return false;
  }
  const length = ctx.responseLength;
  if (length !== undefined && length < conf.min_length) return false;
  return ctx.httpVersion >= conf.http_version;
}

export const gzip: GatewayPlugin<GzipConf> = {
  name: 'gzip', version: 0.1, priority: 995,
  schema: {
    type: 'object',
    properties: {
      types: COMPRESS_TYPES,
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
    if (!compressible(conf, ctx)) return;
    ctx.gzipLevel = conf.comp_level;
    if (conf.vary) ctx.addResponseHeader('Vary', 'Accept-Encoding');
  },
};

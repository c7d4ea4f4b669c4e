/**
 * brotli (apisix/plugins/brotli.lua): in the header filter, a response to a
 * client that accepts `br` (or `*`, not with q=0), without Content-Encoding
 * yet, whose media type is one of `types` (any with `*`; none without
 * Content-Type), not shorter than `min_length` when its length is known, to
 * a request of at least `http_version`, is compressed with node:zlib's
 * brotli at `comp_level` (quality), `mode`, `lgwin` and `lgblock`:
 * Content-Encoding br, no Content-Length, a strong ETag made weak (one not
 * quoted dropped); `vary` adds `Vary: Accept-Encoding`. Any status, as the
 * Lua (unlike nginx's gzip). The body streams through the brotli filter
 * module (src/http/modules/brotli/filter.ts), flushed after each piece as
 * APISIX flushes its compressor; that runs after the plugins' body filters,
 * which see the plain body (in APISIX, those of a lower priority see it
 * compressed).
 */
import { compressible, COMPRESS_TYPES } from './gzip.ts';
import type { GatewayPlugin } from './registry.ts';
import type { PluginContext } from './phase-api.ts';

interface BrotliConf {
  types: string[] | '*'; min_length: number; mode: number; comp_level: number;
  lgwin: number; lgblock: number; http_version: number; vary?: boolean;
}

/** check_accept_encoding: `br` or `*` alone, or one in a list whose q is not exactly "0". */
function acceptsBr(value: string | undefined): boolean {
  if (value === undefined) return false;
  if (value === '*' || value === 'br') return true;
  for (const m of value.matchAll(/([a-z*]+)(;q=)?([0-9.]*)/g)) {
    if ((m[1] === 'br' || m[1] === '*') && (m[2] === undefined || m[3] !== '0')) return true;
  }
  return false;
}

/** weak_etag_header: W/ before a strong ETag; one that is not quoted cannot be weakened and goes. */
function weakenEtag(ctx: PluginContext): void {
  const etag = ctx.responseHeader('ETag');
  if (etag === undefined) return;
  const m = /^(W\/)?"([^"]*)"$/.exec(etag);
  if (!m) ctx.setResponseHeader('ETag', undefined);
  else if (!m[1]) ctx.setResponseHeader('ETag', `W/"${m[2]}"`);
}

function matches(conf: BrotliConf, ctx: PluginContext): boolean {
  if (!acceptsBr(ctx.header('accept-encoding'))) return false;
  if (ctx.responseHeader('Content-Encoding') !== undefined) return false;
  return compressible(conf, ctx);
}

export const brotli: GatewayPlugin<BrotliConf> = {
  name: 'brotli', version: 0.1, priority: 996,
  schema: {
    type: 'object',
    properties: {
      types: COMPRESS_TYPES,
      min_length: { type: 'integer', minimum: 1, default: 20 },
      mode: { type: 'integer', minimum: 0, maximum: 2, default: 0 },
      comp_level: { type: 'integer', minimum: 0, maximum: 11, default: 6 },
      lgwin: { type: 'integer', default: 19, enum: [0, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24] },
      lgblock: { type: 'integer', default: 0, enum: [0, 16, 17, 18, 19, 20, 21, 22, 23, 24] },
      http_version: { enum: [1.1, 1.0], default: 1.1 },
      vary: { type: 'boolean' },
    },
  },
  headerFilter(conf, ctx) {
    if (!matches(conf, ctx)) return;
    if (conf.vary) ctx.addResponseHeader('Vary', 'Accept-Encoding');
    ctx.brotli = { quality: conf.comp_level, lgwin: conf.lgwin, lgblock: conf.lgblock, mode: conf.mode };
    ctx.setResponseHeader('Content-Encoding', 'br');
    weakenEtag(ctx);
  },
};

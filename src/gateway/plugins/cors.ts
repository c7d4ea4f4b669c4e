/**
 * cors (apisix/plugins/cors.lua): an OPTIONS request is answered 200 at
 * once (rewrite); on every answer the Access-Control-* headers when the
 * request's Origin is allowed: `allow_origins` `*`, `**` (any origin,
 * echoed), one origin (sent as configured), or a comma list (the request's
 * Origin when listed; else no CORS headers), or `allow_origins_by_regex`.
 * `Vary: Origin` unless allow_origins is `*`. Metadata origins are not
 * supported yet.
 */
import type { GatewayPlugin } from './registry.ts';

interface CorsConf {
  allow_origins: string; allow_methods: string; allow_headers: string; expose_headers?: string; max_age: number;
  allow_credential: boolean; allow_origins_by_regex?: string[]; timing_allow_origins?: string;
}

const ORIGIN = {};
const ALL_METHODS = 'GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS,CONNECT,TRACE';

function allowedOrigin(conf: CorsConf, origin: string | undefined): string | undefined {
  if (conf.allow_origins_by_regex) {
    if (origin === undefined) return undefined;
    return new RegExp(conf.allow_origins_by_regex.join('|')).test(origin) ? origin : undefined;
  }
  let allow = conf.allow_origins;
  if (allow === '**') allow = origin ?? '*';
  if (!allow.includes(',')) return allow;
  return origin !== undefined && allow.split(',').map((s) => s.trim()).includes(origin) ? origin : undefined;
}

export const cors: GatewayPlugin<CorsConf> = {
  name: 'cors', version: 0.1, priority: 4000,
  schema: {
    type: 'object',
    properties: {
      allow_origins: { type: 'string', pattern: '^(\\*|\\*\\*|null|\\w+://[^,]+(,\\w+://[^,]+)*)$', default: '*' },
      allow_methods: { type: 'string', default: '*' },
      allow_headers: { type: 'string', default: '*' },
      expose_headers: { type: 'string' },
      max_age: { type: 'integer', default: 5 },
      allow_credential: { type: 'boolean', default: false },
      allow_origins_by_regex: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', minLength: 1, maxLength: 4096 } },
      allow_origins_by_metadata: { type: 'array', minItems: 1, items: { type: 'string', minLength: 1, maxLength: 4096 } },
      timing_allow_origins: { type: 'string' },
      timing_allow_origins_by_regex: { type: 'array', minItems: 1, items: { type: 'string' } },
    },
    if: { properties: { allow_credential: { const: true } }, required: ['allow_credential'] },
    then: { properties: {
      allow_origins: { not: { const: '*' } }, allow_methods: { not: { const: '*' } },
      allow_headers: { not: { const: '*' } }, expose_headers: { not: { const: '*' } },
    } },
  },
  rewrite(_conf, ctx) {
    ctx.state.set(ORIGIN, ctx.header('origin'));
    if (ctx.method === 'OPTIONS') return { status: 200 };
    return undefined;
  },
  headerFilter(conf, ctx) {
    const origin = ctx.state.get(ORIGIN) as string | undefined;
    const allow = allowedOrigin(conf, origin);
    if (conf.allow_origins !== '*') ctx.addResponseHeader('Vary', 'Origin');
    if (allow === undefined) return;
    ctx.setResponseHeader('Access-Control-Allow-Origin', allow);
    ctx.setResponseHeader('Access-Control-Allow-Methods', conf.allow_methods === '**' ? ALL_METHODS : conf.allow_methods);
    ctx.setResponseHeader('Access-Control-Max-Age', String(conf.max_age));
    if (conf.expose_headers) ctx.setResponseHeader('Access-Control-Expose-Headers', conf.expose_headers);
    ctx.setResponseHeader('Access-Control-Allow-Headers', conf.allow_headers === '**' ? ctx.header('access-control-request-headers') : conf.allow_headers);
    if (conf.allow_credential) ctx.setResponseHeader('Access-Control-Allow-Credentials', 'true');
  },
};

/**
 * cors (apisix/plugins/cors.lua): an OPTIONS request is answered 200 at
 * once (rewrite); on every answer the Access-Control-* headers when the
 * request's Origin is allowed: `allow_origins` `*`, `**` (any origin,
 * echoed), one origin (sent as configured), or a comma list (the request's
 * Origin when listed; else no CORS headers), or `allow_origins_by_regex`,
 * or the lists of the plugin metadata's `allow_origins` that
 * `allow_origins_by_metadata` names (tried first; the route's own list
 * after them unless it is `*`). `Vary: Origin` unless allow_origins is `*`.
 * `Timing-Allow-Origin` the same way from `timing_allow_origins` or
 * `timing_allow_origins_by_regex`.
 */
import type { PluginContext } from './phase-api.ts';
import type { GatewayPlugin } from './registry.ts';

interface CorsConf {
  allow_origins: string; allow_methods: string; allow_headers: string; expose_headers?: string; max_age: number;
  allow_credential: boolean; allow_origins_by_regex?: string[]; allow_origins_by_metadata?: string[];
  timing_allow_origins?: string; timing_allow_origins_by_regex?: string[];
}

const ORIGIN = {};
const ALL_METHODS = 'GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS,CONNECT,TRACE';
const ORIGINS_PATTERN = '^(\\*|\\*\\*|null|\\w+://[^,]+(,\\w+://[^,]+)*)$';

/** process_with_allow_origins: `**` echoes; a comma list gives the Origin when listed (else nothing); one value as it is. */
function fromList(allow: string, origin: string | undefined): string | undefined {
  if (allow === '**') allow = origin ?? '*';
  if (!allow.includes(',')) return allow;
  return origin !== undefined && allow.split(',').map((s) => s.trim()).includes(origin) ? origin : undefined;
}

const regexes = new WeakMap<string[], RegExp>();

/** process_with_allow_origins_by_regex: the Origin when one of the patterns finds it. */
function fromRegex(patterns: string[], origin: string | undefined): string | undefined {
  if (origin === undefined) return undefined;
  let re = regexes.get(patterns);
  if (!re) regexes.set(patterns, (re = new RegExp(patterns.join('|'))));
  return re.test(origin) ? origin : undefined;
}

function matches(origin: string | undefined, allow: string | undefined): boolean {
  return allow !== undefined && (allow === origin || allow === '*');
}

/** process_with_allow_origins_by_metadata: the Origin when one of the named metadata lists allows it. */
function fromMetadata(names: string[] | undefined, origin: string | undefined, ctx: PluginContext): string | undefined {
  if (!names) return undefined;
  const lists = ctx.pluginMetadata('cors')?.allow_origins as Record<string, string> | undefined;
  if (!lists) return undefined;
  for (const name of names) {
    const list = lists[name];
    if (typeof list === 'string' && matches(origin, fromList(list, origin))) return origin;
  }
  return undefined;
}

function allowedOrigin(conf: CorsConf, origin: string | undefined, ctx: PluginContext): string | undefined {
  let allow: string | undefined;
  let local = true;
  if (conf.allow_origins_by_metadata) {
    allow = fromMetadata(conf.allow_origins_by_metadata, origin, ctx);
    local = !matches(origin, allow) && conf.allow_origins !== '*';
  }
  if (local) allow = conf.allow_origins_by_regex ? fromRegex(conf.allow_origins_by_regex, origin) : fromList(conf.allow_origins, origin);
  // an origin that is not allowed after all gets nothing (unless the metadata allows it)
  if (!matches(origin, allow)) allow = fromMetadata(conf.allow_origins_by_metadata, origin, ctx);
  return allow;
}

export const cors: GatewayPlugin<CorsConf> = {
  name: 'cors', version: 0.1, priority: 4000,
  schema: {
    type: 'object',
    properties: {
      allow_origins: { type: 'string', pattern: ORIGINS_PATTERN, default: '*' },
      allow_methods: { type: 'string', default: '*' },
      allow_headers: { type: 'string', default: '*' },
      expose_headers: { type: 'string' },
      max_age: { type: 'integer', default: 5 },
      allow_credential: { type: 'boolean', default: false },
      allow_origins_by_regex: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', minLength: 1, maxLength: 4096 } },
      allow_origins_by_metadata: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', minLength: 1, maxLength: 4096 } },
      timing_allow_origins: { type: 'string', pattern: ORIGINS_PATTERN },
      timing_allow_origins_by_regex: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', minLength: 1, maxLength: 4096 } },
    },
  },
  // APISIX's check_schema, on the conf with its defaults (so allow_credential alone meets the default '*')
  checkConf(conf) {
    if (conf.allow_credential && (conf.allow_origins === '*' || conf.allow_methods === '*' || conf.allow_headers === '*' ||
      conf.expose_headers === '*' || conf.timing_allow_origins === '*')) {
      return "you can not set '*' for other option when 'allow_credential' is true";
    }
    return undefined;
  },
  metadataSchema: {
    type: 'object',
    properties: { allow_origins: { type: 'object', additionalProperties: { type: 'string', pattern: ORIGINS_PATTERN } } },
  },
  rewrite(_conf, ctx) {
    ctx.state.set(ORIGIN, ctx.header('origin'));
    if (ctx.method === 'OPTIONS') return { status: 200 };
    return undefined;
  },
  headerFilter(conf, ctx) {
    const origin = ctx.state.get(ORIGIN) as string | undefined;
    const allow = allowedOrigin(conf, origin, ctx);
    if (conf.allow_origins !== '*') ctx.addResponseHeader('Vary', 'Origin');
    const timing = conf.timing_allow_origins_by_regex ? fromRegex(conf.timing_allow_origins_by_regex, origin)
      : conf.timing_allow_origins !== undefined ? fromList(conf.timing_allow_origins, origin) : undefined;
    if (matches(origin, timing)) ctx.setResponseHeader('Timing-Allow-Origin', timing);
    if (allow === undefined) return;
    ctx.setResponseHeader('Access-Control-Allow-Origin', allow);
    ctx.setResponseHeader('Access-Control-Allow-Methods', conf.allow_methods === '**' ? ALL_METHODS : conf.allow_methods);
    ctx.setResponseHeader('Access-Control-Max-Age', String(conf.max_age));
    if (conf.expose_headers) ctx.setResponseHeader('Access-Control-Expose-Headers', conf.expose_headers);
    ctx.setResponseHeader('Access-Control-Allow-Headers', conf.allow_headers === '**' ? ctx.header('access-control-request-headers') : conf.allow_headers);
    if (conf.allow_credential) ctx.setResponseHeader('Access-Control-Allow-Credentials', 'true');
  },
};

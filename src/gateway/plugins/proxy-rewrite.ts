/**
 * proxy-rewrite (apisix/plugins/proxy-rewrite.lua): what goes upstream
 * instead of what came — `uri` (with `$var`s), else the first `regex_uri`
 * pair whose pattern matches the path (its first match replaced, `$1` /
 * `${1}` captures, also in header values), the request's arguments kept after it; `host`; `method`;
 * request headers `add`, `set` (values with `$var`s) and `remove`, or the
 * older flat `{name: value}` form (set; an empty value removes).
 */
import type { PluginContext } from './phase-api.ts';
import { firstMatch, regexUriError, replaceMatch, withCaptures } from './regex-sub.ts';
import type { GatewayPlugin } from './registry.ts';

interface HeaderOps { add?: Record<string, string | string[]>; set?: Record<string, string | string[]>; remove?: string[] }
interface ProxyRewriteConf { uri?: string; regex_uri?: string[]; host?: string; method?: string; headers?: HeaderOps | Record<string, string> }

const METHODS = ['GET', 'POST', 'PUT', 'HEAD', 'DELETE', 'OPTIONS', 'MKCOL', 'COPY', 'MOVE', 'PROPFIND', 'LOCK', 'UNLOCK', 'PATCH', 'TRACE'];
const HEADER_VALUES = { type: 'object', minProperties: 1, patternProperties: { '^[^:]+$': { oneOf: [{ type: 'string' }, { type: 'number' }, { type: 'array', minItems: 1, items: { oneOf: [{ type: 'string' }, { type: 'number' }] } }] } } };

/** `$name` and `${name}` replaced by the request's variables (APISIX's core.utils.resolve_var). */
export function resolveVars(text: string, ctx: PluginContext): string {
  return text.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, braced: string | undefined, plain: string | undefined) => ctx.variable(braced ?? plain!) ?? '');
}

function isOps(h: ProxyRewriteConf['headers']): h is HeaderOps {
  return !!h && ('add' in h || 'set' in h || 'remove' in h);
}

function values(v: string | string[] | number): string[] {
  return (Array.isArray(v) ? v : [v]).map(String);
}

export const proxyRewrite: GatewayPlugin<ProxyRewriteConf> = {
  name: 'proxy-rewrite', version: 0.1, priority: 1008,
  schema: {
    type: 'object',
    properties: {
      uri: { type: 'string', minLength: 1, maxLength: 4096, pattern: '^\\/.*' },
      method: { type: 'string', enum: METHODS },
      regex_uri: { type: 'array', minItems: 2, items: { type: 'string' } },
      host: { type: 'string', pattern: '^[0-9a-zA-Z-.]+(:\\d{1,5})?$' },
      headers: {
        oneOf: [
          { type: 'object', minProperties: 1, additionalProperties: false, properties: {
            add: HEADER_VALUES, set: HEADER_VALUES,
            remove: { type: 'array', minItems: 1, items: { type: 'string', pattern: '^[^:]+$' } },
          } },
          { type: 'object', minProperties: 1, patternProperties: { '^[^:]+$': { oneOf: [{ type: 'string' }, { type: 'number' }] } } },
        ],
      },
      use_real_request_uri_unsafe: { type: 'boolean', default: false },
    },
    minProperties: 1,
  },
  // APISIX's check_schema: regex_uri in pairs of a valid pattern, and the flat headers form's names and values checked
  checkConf(conf) {
    const r = conf.regex_uri;
    if (r && r.length % 2 !== 0) return 'The length of regex_uri should be an even number';
    for (let i = 0; r && i < r.length; i += 2) {
      const err = regexUriError(r[i], r[i + 1]);
      if (err) return `invalid regex_uri(${r[i]}, ${r[i + 1]}): ${err}`;
    }
    const h = conf.headers;
    if (!h || isOps(h)) return undefined;
    for (const [field, value] of Object.entries(h)) {
      // a name of '!'..'~' but ':', a value without control characters
      if (!/^[!-9;-~]+$/.test(field)) return 'invalid field character in header';
      if (typeof value === 'string' && /[^ -~]/.test(value)) return 'invalid value character in header';
    }
    return undefined;
  },
  rewrite(conf, ctx) {
    if (conf.host !== undefined) ctx.upstreamHost = conf.host;
    if (conf.method !== undefined) ctx.upstreamMethod = conf.method;
    let uri: string | undefined;
    // the matching regex_uri's captures, for `$1` in header values
    let captures: string[] | undefined;
    if (conf.uri !== undefined) uri = resolveVars(conf.uri, ctx);
    else if (conf.regex_uri) {
      const path = ctx.variable('uri') ?? '/';
      for (let i = 0; i + 1 < conf.regex_uri.length; i += 2) {
        const m = firstMatch(path, conf.regex_uri[i]);
        if (m) {
          captures = Array.from(m, (c) => c ?? '');
          uri = replaceMatch(path, m, conf.regex_uri[i + 1]);
          break;
        }
      }
    }
    if (uri !== undefined) {
      // the arguments as they go now (an auth plugin may have taken its key out)
      const current = ctx.upstreamUri;
      const q = current.indexOf('?');
      ctx.upstreamUri = q >= 0 ? `${uri}${uri.includes('?') ? '&' : '?'}${current.slice(q + 1)}` : uri;
    }
    const h = conf.headers;
    if (!h) return undefined;
    const resolve = (v: string) => resolveVars(withCaptures(v, captures), ctx);
    // a value that resolves to nothing removes the header, as ngx.req.set_header(name, '') does
    const set = (name: string, v: string) => ctx.setRequestHeader(name, v === '' ? undefined : v);
    if (!isOps(h)) {
      for (const [name, v] of Object.entries(h)) set(name, resolve(String(v)));
      return undefined;
    }
    for (const [name, v] of Object.entries(h.add ?? {})) for (const x of values(v)) ctx.addRequestHeader(name, resolve(x));
    for (const [name, v] of Object.entries(h.set ?? {})) set(name, values(v).map(resolve).join(', '));
    for (const name of h.remove ?? []) ctx.setRequestHeader(name, undefined);
    return undefined;
  },
};

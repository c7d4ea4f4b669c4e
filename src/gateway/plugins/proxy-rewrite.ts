/**
 * proxy-rewrite (apisix/plugins/proxy-rewrite.lua): what goes upstream
 * instead of what came — `uri` (with `$var`s), else the first `regex_uri`
 * pair whose pattern matches the path (its first match replaced, `$1` /
 * `${1}` captures, also in header values), the request's arguments kept after it; `host`; `method`;
 * request headers `add`, `set` (values with `$var`s) and `remove`, or the
 * older flat `{name: value}` form (set; an empty value removes);
 * `use_real_request_uri_unsafe` starts from the client's request target and
 * sends the result unescaped. Patterns are PCRE, as ngx.re compiles them.
 */
import { escapeUri } from '../../http/uri.ts';
import type { PluginContext } from './phase-api.ts';
import { firstMatch, regexUriError, replaceMatch, withCaptures } from './regex-sub.ts';
import type { GatewayPlugin } from './registry.ts';
import { resolveVar } from './resolve-var.ts';

interface HeaderOps { add?: Record<string, string | string[]>; set?: Record<string, string | string[]>; remove?: string[] }
interface ProxyRewriteConf {
  uri?: string; regex_uri?: string[]; host?: string; method?: string; headers?: HeaderOps | Record<string, string>;
  use_real_request_uri_unsafe?: boolean;
}

const METHODS = ['GET', 'POST', 'PUT', 'HEAD', 'DELETE', 'OPTIONS', 'MKCOL', 'COPY', 'MOVE', 'PROPFIND', 'LOCK', 'UNLOCK', 'PATCH', 'TRACE'];
const HEADER_VALUES = { type: 'object', minProperties: 1, patternProperties: { '^[^:]+$': { oneOf: [{ type: 'string' }, { type: 'number' }, { type: 'array', minItems: 1, items: { oneOf: [{ type: 'string' }, { type: 'number' }] } }] } } };

function isOps(h: ProxyRewriteConf['headers']): h is HeaderOps {
  return !!h && ('add' in h || 'set' in h || 'remove' in h);
}

function values(v: string | string[] | number): string[] {
  return (Array.isArray(v) ? v : [v]).map(String);
}

/**
 * The new uri as proxy-rewrite.lua sends it: the path escaped as ngx_escape_uri does (a `?` that
 * starts arguments written in the uri kept, control characters after it escaped), `$uri` set to
 * it (ngx.req.set_uri), then the request's arguments as they go now (an auth plugin may have
 * taken its key out).
 */
function setUpstreamUri(ctx: PluginContext, path: string, separator: boolean): void {
  const q = separator ? path.indexOf('?') : -1;
  const uri = q >= 0 ? escapeUri(path.slice(0, q)) + path.slice(q).replace(/[\x00-\x1f\x7f]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`)
    : escapeUri(path);
  // APISIX's ctx.var.uri keeps the routed path; ngx.var.uri (Lua, the log) is the new one
  ctx.setUri(uri);
  const current = ctx.upstreamUri;
  const at = current.indexOf('?');
  ctx.upstreamUri = at >= 0 ? `${uri}${q >= 0 ? '&' : '?'}${current.slice(at + 1)}` : uri;
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
    // use_real_request_uri_unsafe: the client's own request target, arguments included, goes as it is made
    const unsafe = conf.use_real_request_uri_unsafe === true;
    let uri = (unsafe ? ctx.variable('real_request_uri') : ctx.variable('uri')) ?? '/';
    const query = unsafe && uri.includes('?') ? uri.slice(uri.indexOf('?')) : '';
    // whether a `?` in the new uri starts its arguments (not so in a path that came decoded from the client)
    let separator = false;
    // the matching regex_uri's captures, for `$1` in header values
    let captures: Array<string | undefined> | undefined;
    if (conf.uri !== undefined) {
      separator = true;
      uri = resolveVar(conf.uri, ctx, (v) => v.replace(/\?/g, '%3F'));
      if (query) uri += uri.includes('?') ? `&${query.slice(1)}` : query;
    } else if (conf.regex_uri) {
      separator = !uri.includes('?');
      for (let i = 0; i + 1 < conf.regex_uri.length; i += 2) {
        const m = firstMatch(uri, conf.regex_uri[i]);
        if (m) {
          captures = m.captures;
          uri = replaceMatch(uri, m, conf.regex_uri[i + 1]);
          break;
        }
      }
    }
    if (unsafe) ctx.upstreamUri = uri;
    else setUpstreamUri(ctx, uri, separator);
    const h = conf.headers;
    if (!h) return undefined;
    const resolve = (v: string) => resolveVar(withCaptures(v, captures), ctx);
    // a value that resolves to nothing removes the header, as ngx.req.set_header(name, '') does
    const set = (name: string, v: string) => ctx.setRequestHeader(name, v === '' ? undefined : v);
    if (!isOps(h)) {
      for (const [name, v] of Object.entries(h)) set(name, resolve(String(v)));
      return undefined;
    }
    for (const [name, v] of Object.entries(h.add ?? {})) for (const x of values(v)) ctx.addRequestHeader(name, resolve(x));
    for (const [name, v] of Object.entries(h.set ?? {})) {
      if (!Array.isArray(v)) { set(name, resolve(String(v))); continue; }
      // an array sets one header per value (core.request.set_header with a table)
      ctx.setRequestHeader(name, undefined);
      for (const x of values(v)) ctx.addRequestHeader(name, resolve(x));
    }
    for (const name of h.remove ?? []) ctx.setRequestHeader(name, undefined);
    return undefined;
  },
};

/**
 * redirect (apisix/plugins/redirect.lua): `uri` (with `$vars`) or the
 * first match of `regex_uri` on the path (no match: no redirect) answered
 * with `ret_code` (302) and Location; `http_to_https` sends a plain-http
 * request (X-Forwarded-Proto counts) to `https://$host$request_uri` with
 * 301 (GET, HEAD) or 308, the port plugin_attr.redirect.https_port or one
 * of apisix.ssl.listen's (none for 443); `append_query_string` keeps the arguments;
 * `encode_uri` escapes the new path.
 */
import { escapeUri } from '../../http/uri.ts';
import type { PluginContext } from './phase-api.ts';
import { regexUriError, reSub } from './regex-sub.ts';
import type { GatewayPlugin } from './registry.ts';

interface RedirectConf {
  uri?: string; regex_uri?: [string, string]; http_to_https?: boolean; ret_code: number;
  encode_uri: boolean; append_query_string: boolean;
}

/**
 * redirect.lua's concat_new_uri: `${name}` and `$name` (letters, digits, `_`) are variables (unset: nothing),
 * `\\$name` stays as written, backslash included.
 */
function newUri(template: string, ctx: PluginContext): string {
  return template.replace(/(\\\$[0-9a-zA-Z_]+)|\$\{([0-9a-zA-Z_]+)\}|\$([0-9a-zA-Z_]+)/g,
    (_m, kept: string | undefined, braced: string | undefined, plain: string | undefined) => kept ?? ctx.variable(braced ?? plain!) ?? '');
}

/** redirect.lua's get_port: plugin_attr.redirect.https_port, else one of apisix.ssl.listen's ports (at random, as APISIX picks). */
function httpsPort(ctx: PluginContext): number | undefined {
  const attr = ctx.pluginAttr('redirect')?.https_port;
  if (typeof attr === 'number') return attr;
  const ports = ctx.sslPorts;
  return ports.length === 0 ? undefined : ports[Math.floor(Math.random() * ports.length)];
}

export const redirect: GatewayPlugin<RedirectConf> = {
  name: 'redirect', version: 0.1, priority: 900,
  schema: {
    type: 'object',
    properties: {
      ret_code: { type: 'integer', minimum: 200, default: 302 },
      uri: { type: 'string', minLength: 2, pattern: '(\\\\\\$[0-9a-zA-Z_]+)|\\$\\{([0-9a-zA-Z_]+)\\}|\\$([0-9a-zA-Z_]+)|(\\$|[^$\\\\]+)' },
      regex_uri: { type: 'array', minItems: 2, maxItems: 2, items: { type: 'string' } },
      http_to_https: { type: 'boolean' },
      encode_uri: { type: 'boolean', default: false },
      append_query_string: { type: 'boolean', default: false },
    },
    oneOf: [{ required: ['uri'] }, { required: ['regex_uri'] }, { required: ['http_to_https'] }],
  },
  checkConf(conf) {
    if (conf.regex_uri) {
      const err = regexUriError(conf.regex_uri[0], conf.regex_uri[1]);
      if (err) return `invalid regex_uri (${conf.regex_uri[0]}, ${conf.regex_uri[1]}), err:${err}`;
    }
    // APISIX's check: the https target is $request_uri, arguments included already
    if (conf.http_to_https && conf.append_query_string) return 'only one of `http_to_https` and `append_query_string` can be configured.';
    return undefined;
  },
  rewrite(conf, ctx) {
    let code = conf.ret_code;
    let uri = conf.uri;
    const scheme = ctx.header('x-forwarded-proto') ?? ctx.variable('scheme');
    if (conf.http_to_https && scheme !== 'https') {
      const port = httpsPort(ctx);
      uri = port === undefined || port === 443 || port <= 0 || port > 65535 ? 'https://$host$request_uri' : `https://$host:${port}$request_uri`;
      code = ctx.method === 'GET' || ctx.method === 'HEAD' ? 301 : 308;
    }
    let target: string | undefined;
    if (uri !== undefined) target = newUri(uri, ctx);
    else if (conf.regex_uri) {
      const path = ctx.variable('uri') ?? '/';
      target = reSub(path, conf.regex_uri[0], conf.regex_uri[1]);
    }
    if (target === undefined) return undefined;
    // encode_uri: the part before `?` as ngx_escape_uri (NGX_ESCAPE_URI) escapes it
    if (conf.encode_uri) {
      const q = target.indexOf('?');
      target = q < 0 ? escapeUri(target) : escapeUri(target.slice(0, q)) + target.slice(q);
    }
    if (conf.append_query_string && ctx.variable('is_args') === '?') target += (target.includes('?') ? '&' : '?') + (ctx.variable('args') ?? '');
    return { status: code, location: target };
  },
};

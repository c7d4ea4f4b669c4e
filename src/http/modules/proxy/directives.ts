/**
 * ngx_http_proxy_module's directive table: every `proxy_*` directive with
 * nginx's argument rules and error messages, writing the location's
 * ProxyLocConf. The rows every upstream protocol module has (buffers,
 * timeouts, next_upstream, hidden headers…) come from upstream/directives.ts.
 */
import type { ConfContext } from '../../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../../conf/directive.ts';
import type { Directive } from '../../../conf/directive.ts';
import { choiceOf, flagArg } from '../../../conf/values.ts';
import { listOf, setting } from '../../../conf/setters.ts';
import type { Parse } from '../../../conf/setters.ts';
import { httpMainOf } from '../../http-conf.ts';
import type { LocationConf } from '../../http-conf.ts';
import { compileComplex } from '../../../core/variables.ts';
import { proxyLoc } from './conf.ts';
import type { ProxyLocConf } from './conf.ts';
import { compileRule } from './redirect.ts';
import type { RedirectRule } from './redirect.ts';
import { upstreamDirectives, upstreamSslDirectives } from '../../upstream/directives.ts';
import { dynamicTarget, staticTarget } from './target.ts';

type Handler = Directive['handler'];
type Field = keyof ProxyLocConf;
/** The fields that hold a `T`. */
type FieldOf<T> = { [K in Field]-?: ProxyLocConf[K] extends T | undefined ? K : never }[Field];

const LOC_ANY = HTTP_ANY;

function single<K extends Field>(name: string, field: K, parse: Parse<ProxyLocConf[K]>, contexts = LOC_ANY): Directive {
  return { name, contexts, args: 1, handler: setting(proxyLoc, field, parse) };
}

const flag = (name: string, field: FieldOf<boolean>) => ({ ...single(name, field, flagArg), args: 'flag' as const });

/** Accepted for compatibility, without effect (listed in docs/directives.md). */
function accepted(name: string, args: Directive['args']): Directive {
  return { name, contexts: LOC_ANY, args, handler: () => undefined };
}

const proxyPass: Handler = (cf, node) => {
  const c = cf.get(proxyLoc);
  // hand-written: `target` may be inherited later, so this level's own proxy_pass is marked apart
  if (c.ownTarget) return 'is duplicate';
  const loc = cf.data.location as LocationConf | undefined;
  if (!loc) throw cf.error('"proxy_pass" directive is not allowed here');
  const url = node.args[0];
  const vars = httpMainOf(cf).variables;
  if (url.includes('$')) {
    c.target = dynamicTarget(url, compileComplex(cf, vars, url));
  } else {
    const special = loc.match === 'regex' || loc.match === 'named' || loc.noname === true;
    const t = staticTarget(cf, url, special ? '' : loc.name);
    if (special && t.uri) {
      throw cf.error('"proxy_pass" cannot have URI part in location given by regular expression, '
        + 'or inside named location, or inside "if" statement, or inside "limit_except" block');
    }
    c.target = t;
  }
  c.ownTarget = true;
  c.defaultTempPath = cf.prefixPath('proxy_temp');
  loc.contentHandler = proxyContentHandler;
  if (loc.name.endsWith('/') && loc.match !== 'regex' && !loc.noname) loc.autoRedirect = true;
};

/** Set by index.ts: the content handler proxy_pass installs (kept here to avoid an import cycle). */
let proxyContentHandler: LocationConf['contentHandler'];
export function setProxyContentHandler(h: LocationConf['contentHandler']): void {
  proxyContentHandler = h;
}

const setHeader = listOf(proxyLoc, 'setHeaders', (cf, node) => ({ name: node.args[0], value: cv(cf, node.args[1]) }));

const redirect: Handler = (cf, node) => {
  const c = cf.get(proxyLoc);
  const a = node.args;
  // hand-written: `off` excludes rules on the same level and rules exclude `off`
  if (c.redirect === false) return 'is duplicate';
  if (a.length === 1) {
    if (a[0] === 'off') {
      if (c.redirect) return 'is duplicate';
      c.redirect = false;
      return;
    }
    if (a[0] !== 'default') throw cf.error(`invalid parameter "${a[0]}"`);
    if (c.target?.dynamic) throw cf.error('"proxy_redirect default" cannot be used with "proxy_pass" directive with variables');
    if (!c.ownTarget) throw cf.error('"proxy_redirect default" should be placed after the "proxy_pass" directive');
    const rule: RedirectRule = { pattern: undefined, regex: undefined, replacement: compileComplex(cf, httpMainOf(cf).variables, ''), isDefault: true };
    (c.redirect || (c.redirect = [])).push(rule);
    return;
  }
  (c.redirect || (c.redirect = [])).push(compileRule(cf, httpMainOf(cf).variables, a[0], a[1]));
};

const httpVersion: Handler = setting(proxyLoc, 'httpVersion', choiceOf(['1.0', '1.1']));

const cv = (cf: ConfContext, v: string) => compileComplex(cf, httpMainOf(cf).variables, v);

const complex = (name: string, field: 'setBody' | 'method'): Directive => ({ name, contexts: LOC_ANY, args: 1, handler: setting(proxyLoc, field, cv) });

export const proxyDirectives: Directive[] = [
  ...upstreamDirectives('proxy_', proxyLoc),
  ...upstreamSslDirectives('proxy_', proxyLoc),
  { name: 'proxy_pass', contexts: Ctx.LOCATION | Ctx.LIF | Ctx.LMT, args: 1, handler: proxyPass },
  { name: 'proxy_set_header', contexts: LOC_ANY, args: 2, handler: setHeader },
  complex('proxy_set_body', 'setBody'),
  complex('proxy_method', 'method'),
  { name: 'proxy_http_version', contexts: LOC_ANY, args: 1, handler: httpVersion },
  { name: 'proxy_redirect', contexts: LOC_ANY, args: [1, 2], handler: redirect },
  flag('proxy_pass_trailers', 'passTrailers'),
  accepted('proxy_headers_hash_max_size', 1),
  accepted('proxy_headers_hash_bucket_size', 1),
];

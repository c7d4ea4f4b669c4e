/**
 * ngx_http_proxy_module's directive table: every `proxy_*` directive with
 * nginx's argument rules and error messages, writing the location's
 * ProxyLocConf.
 */
import type { ConfContext } from '../../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../../conf/directive.ts';
import type { Directive } from '../../../conf/directive.ts';
import { choiceOf, confPathArg, countArg, flagArg, msecArg, parseSize, sizeArg, stringArg, tempPathArg } from '../../../conf/values.ts';
import { listOf, setting, unique } from '../../../conf/setters.ts';
import type { Parse } from '../../../conf/setters.ts';
import { httpMainOf } from '../../http-conf.ts';
import type { LocationConf } from '../../http-conf.ts';
import { compileComplex } from '../../../core/variables.ts';
import { FT, IGN } from '../../upstream/conf.ts';
import type { SslConf } from '../../upstream/conf.ts';
import { proxyLoc } from './conf.ts';
import type { ProxyLocConf } from './conf.ts';
import { compileRule } from './redirect.ts';
import type { RedirectRule } from './redirect.ts';
import { parseCertCache } from '../../upstream/cert-cache.ts';
import { parseAccess, parseStore } from '../../upstream/store.ts';
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
const size = (name: string, field: FieldOf<number>) => single(name, field, sizeArg);
const time = (name: string, field: FieldOf<number>) => single(name, field, msecArg);

/** The location's proxy_ssl_* settings, made on first use; relative certificate paths resolve against the conf prefix. */
function sslConf(cf: ConfContext): SslConf {
  const s = (cf.get(proxyLoc).ssl ??= {});
  s.confPrefix = cf.paths.confPrefix;
  return s;
}

function ssl<K extends keyof SslConf>(name: string, field: K, parse: Parse<SslConf[K]>, args: Directive['args'] = 1): Directive {
  return { name, contexts: LOC_ANY, args, handler: setting(sslConf, field, parse) };
}

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

const headerList = (field: 'hideHeaders' | 'passHeaders'): Handler => listOf(proxyLoc, field, (_cf, node) => node.args[0]);

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

const NEXT_WORDS: Record<string, number> = {
  error: FT.ERROR, timeout: FT.TIMEOUT, invalid_header: FT.INVALID_HEADER,
  http_500: FT.HTTP_500, http_502: FT.HTTP_502, http_503: FT.HTTP_503, http_504: FT.HTTP_504,
  http_403: FT.HTTP_403, http_404: FT.HTTP_404, http_429: FT.HTTP_429,
  non_idempotent: FT.NON_IDEMPOTENT, off: FT.OFF,
  // accepted as nginx does, meaningful only with a cache
  updating: 0,
};

const nextUpstream: Handler = unique(proxyLoc, 'nextUpstream', (cf, node, c) => {
  let mask = 0;
  for (const w of node.args) {
    const bit = NEXT_WORDS[w];
    if (bit === undefined) throw cf.error(`invalid value "${w}"`);
    if (mask & bit) throw cf.error(`duplicate value "${w}"`);
    mask |= bit;
  }
  c.nextUpstream = mask & FT.OFF ? FT.OFF : mask;
});

const ignoreHeaders: Handler = unique(proxyLoc, 'ignoreHeaders', (cf, node, c) => {
  let mask = 0;
  for (const w of node.args) {
    const key = Object.keys(IGN).find((k) => k.toLowerCase() === w.toLowerCase()) as keyof typeof IGN | undefined;
    if (!key) throw cf.error(`invalid value "${w}"`);
    mask |= IGN[key];
  }
  c.ignoreHeaders = mask;
});

const buffers: Handler = unique(proxyLoc, 'buffers', (cf, node, c) => {
  const num = /^\d+$/.test(node.args[0]) ? Number(node.args[0]) : NaN;
  const sz = parseSize(node.args[1]);
  if (!(num > 0) || !(sz > 0)) throw cf.error(`invalid value "${node.args.join(' ')}"`);
  c.buffers = { num, size: sz };
});

const httpVersion: Handler = setting(proxyLoc, 'httpVersion', choiceOf(['1.0', '1.1']));

const tempPath: Handler = setting(proxyLoc, 'tempPath', tempPathArg);

const cv = (cf: ConfContext, v: string) => compileComplex(cf, httpMainOf(cf).variables, v);

const complex = (name: string, field: 'setBody' | 'method'): Directive => ({ name, contexts: LOC_ANY, args: 1, handler: setting(proxyLoc, field, cv) });

/** proxy_limit_rate (ngx_http_set_complex_value_size_slot): a constant is checked now. */
const limitRate: Handler = setting(proxyLoc, 'limitRate', (cf, text) => {
  const v = cv(cf, text);
  return v.constant === undefined ? v : sizeArg(cf, v.constant);
});

const store: Handler = setting(proxyLoc, 'store', parseStore);

const storeAccess: Handler = unique(proxyLoc, 'storeAccess', (_cf, node, c) => {
  const v = parseAccess(node.args);
  if (typeof v === 'string') return v;
  c.storeAccess = v;
});

const bind: Handler = setting(proxyLoc, 'bind', (cf, v) => (v === 'off' ? false : cv(cf, v)));

// as the arguments joined by spaces (a quoted "TLSv1.2 TLSv1.3" is two protocols)
const protocols = (_cf: ConfContext, _v: string, args: readonly string[]) => args.join(' ').split(' ');

export const proxyDirectives: Directive[] = [
  { name: 'proxy_pass', contexts: Ctx.LOCATION | Ctx.LIF | Ctx.LMT, args: 1, handler: proxyPass },
  { name: 'proxy_set_header', contexts: LOC_ANY, args: 2, handler: setHeader },
  flag('proxy_pass_request_headers', 'passRequestHeaders'),
  flag('proxy_pass_request_body', 'passRequestBody'),
  complex('proxy_set_body', 'setBody'),
  complex('proxy_method', 'method'),
  { name: 'proxy_http_version', contexts: LOC_ANY, args: 1, handler: httpVersion },
  { name: 'proxy_redirect', contexts: LOC_ANY, args: [1, 2], handler: redirect },
  { name: 'proxy_hide_header', contexts: LOC_ANY, args: 1, handler: headerList('hideHeaders') },
  { name: 'proxy_pass_header', contexts: LOC_ANY, args: 1, handler: headerList('passHeaders') },
  { name: 'proxy_ignore_headers', contexts: LOC_ANY, args: [1, Infinity], handler: ignoreHeaders },
  flag('proxy_intercept_errors', 'interceptErrors'),
  flag('proxy_buffering', 'buffering'),
  flag('proxy_request_buffering', 'requestBuffering'),
  size('proxy_buffer_size', 'bufferSize'),
  { name: 'proxy_buffers', contexts: LOC_ANY, args: 2, handler: buffers },
  size('proxy_busy_buffers_size', 'busyBuffersSize'),
  { name: 'proxy_temp_path', contexts: LOC_ANY, args: [1, 4], handler: tempPath },
  size('proxy_max_temp_file_size', 'maxTempFileSize'),
  size('proxy_temp_file_write_size', 'tempFileWriteSize'),
  time('proxy_connect_timeout', 'connectTimeout'),
  time('proxy_read_timeout', 'readTimeout'),
  time('proxy_send_timeout', 'sendTimeout'),
  { name: 'proxy_next_upstream', contexts: LOC_ANY, args: [1, Infinity], handler: nextUpstream },
  single('proxy_next_upstream_tries', 'nextUpstreamTries', countArg),
  time('proxy_next_upstream_timeout', 'nextUpstreamTimeout'),
  flag('proxy_ignore_client_abort', 'ignoreClientAbort'),
  flag('proxy_pass_trailers', 'passTrailers'),
  flag('proxy_socket_keepalive', 'socketKeepalive'),
  { name: 'proxy_bind', contexts: LOC_ANY, args: [1, 2], handler: bind },
  { name: 'proxy_limit_rate', contexts: LOC_ANY, args: 1, handler: limitRate },
  { name: 'proxy_store', contexts: LOC_ANY, args: 1, handler: store },
  { name: 'proxy_store_access', contexts: LOC_ANY, args: [1, 3], handler: storeAccess },
  ssl('proxy_ssl_server_name', 'serverName', flagArg, 'flag'),
  ssl('proxy_ssl_name', 'name', cv),
  ssl('proxy_ssl_verify', 'verify', flagArg, 'flag'),
  ssl('proxy_ssl_verify_depth', 'verifyDepth', countArg),
  ssl('proxy_ssl_trusted_certificate', 'trustedCertificate', confPathArg),
  ssl('proxy_ssl_crl', 'crl', confPathArg),
  ssl('proxy_ssl_certificate', 'certificate', cv),
  ssl('proxy_ssl_certificate_key', 'certificateKey', cv),
  ssl('proxy_ssl_password_file', 'passwordFile', confPathArg),
  ssl('proxy_ssl_session_reuse', 'sessionReuse', flagArg, 'flag'),
  ssl('proxy_ssl_protocols', 'protocols', protocols, [1, Infinity]),
  ssl('proxy_ssl_ciphers', 'ciphers', stringArg),
  {
    name: 'proxy_ssl_certificate_cache', contexts: LOC_ANY, args: [1, 3],
    handler: unique((cf) => (cf.get(proxyLoc).ssl ??= {}), 'certificateCache', (_cf, node, s) => {
      const v = parseCertCache(node.args);
      if (typeof v === 'string') return v;
      s.certificateCache = v;
    }),
  },
  accepted('proxy_send_lowat', 1),
  accepted('proxy_headers_hash_max_size', 1),
  accepted('proxy_headers_hash_bucket_size', 1),
  accepted('proxy_force_ranges', 'flag'),
  accepted('proxy_ssl_conf_command', 2),
];

/**
 * The directives every protocol module on the upstream engine has under its
 * own prefix (`proxy_`, `fastcgi_`, `uwsgi_`, `scgi_`): buffers, timeouts,
 * next_upstream, temp files, hidden and passed headers, intercept_errors…
 * nginx repeats these rows in each module's command table; here one factory
 * makes them for a prefix and the module's slot. Also the checks nginx's
 * merge_loc_conf makes on the buffer sizes, and the hidden header set.
 */
import type { ConfContext, ConfSlot } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import { countArg, flagArg, msecArg, parseSize, sizeArg, tempPathArg } from '../../conf/values.ts';
import { bitmask, listOf, setting, unique } from '../../conf/setters.ts';
import type { Parse } from '../../conf/setters.ts';
import { compileComplex } from '../../core/variables.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpMainConf, LocationConf } from '../http-conf.ts';
import { defaultTempPath } from '../request-body.ts';
import { FT, IGN } from './conf.ts';
import type { SslConf, UpstreamConf, UpstreamDerived } from './conf.ts';
import { upstreamTlsDirectives } from '../../tls/upstream-directives.ts';
import { parseAccess, parseStore } from './store.ts';

/** What a protocol module's location configuration has beyond the engine's fields, read by these directives. */
export interface UpstreamModuleConf extends UpstreamConf {
  hideHeaders?: string[];
  passHeaders?: string[];
  passRequestHeaders?: boolean;
  passRequestBody?: boolean;
}

type Field = keyof UpstreamModuleConf;
type FieldOf<T> = { [K in Field]-?: UpstreamModuleConf[K] extends T | undefined ? K : never }[Field];

const NEXT_WORDS: Record<string, number> = {
  error: FT.ERROR, timeout: FT.TIMEOUT, invalid_header: FT.INVALID_HEADER,
  http_500: FT.HTTP_500, http_502: FT.HTTP_502, http_503: FT.HTTP_503, http_504: FT.HTTP_504,
  http_403: FT.HTTP_403, http_404: FT.HTTP_404, http_429: FT.HTTP_429,
  non_idempotent: FT.NON_IDEMPOTENT, off: FT.OFF,
  // accepted as nginx does, meaningful only with a cache
  updating: 0,
};

/** The rows of `prefix`_buffering, `prefix`_next_upstream… writing the slot's UpstreamModuleConf fields. */
export function upstreamDirectives<R extends UpstreamModuleConf>(prefix: string, slot: ConfSlot<R, unknown>): Directive[] {
  const target = slot as unknown as ConfSlot<UpstreamModuleConf, unknown>;
  const single = <K extends Field>(name: string, field: K, parse: Parse<UpstreamModuleConf[K]>): Directive =>
    ({ name: prefix + name, contexts: HTTP_ANY, args: 1, handler: setting(target, field, parse) });
  const flag = (name: string, field: FieldOf<boolean>): Directive => ({ ...single(name, field, flagArg), args: 'flag' });
  const size = (name: string, field: FieldOf<number>) => single(name, field, sizeArg);
  const time = (name: string, field: FieldOf<number>) => single(name, field, msecArg);
  const row = (name: string, args: Directive['args'], handler: Directive['handler']): Directive =>
    ({ name: prefix + name, contexts: HTTP_ANY, args, handler });
  const cv = (cf: ConfContext, v: string) => compileComplex(cf, httpMainOf(cf).variables, v);
  return [
    row('hide_header', 1, listOf(target, 'hideHeaders', (_cf, node) => node.args[0])),
    row('pass_header', 1, listOf(target, 'passHeaders', (_cf, node) => node.args[0])),
    row('ignore_headers', [1, Infinity], bitmask(target, 'ignoreHeaders', (w) => {
      const key = Object.keys(IGN).find((k) => k.toLowerCase() === w.toLowerCase()) as keyof typeof IGN | undefined;
      return key && IGN[key];
    })),
    flag('pass_request_headers', 'passRequestHeaders'),
    flag('pass_request_body', 'passRequestBody'),
    flag('intercept_errors', 'interceptErrors'),
    flag('buffering', 'buffering'),
    flag('request_buffering', 'requestBuffering'),
    size('buffer_size', 'bufferSize'),
    row('buffers', 2, unique(target, 'buffers', (cf, node, c) => {
      const num = /^\d+$/.test(node.args[0]) ? Number(node.args[0]) : NaN;
      const sz = parseSize(node.args[1]);
      if (!(num > 0) || !(sz > 0)) throw cf.error(`invalid value "${node.args.join(' ')}"`);
      c.buffers = { num, size: sz };
    })),
    size('busy_buffers_size', 'busyBuffersSize'),
    row('temp_path', [1, 4], setting(target, 'tempPath', tempPathArg)),
    size('max_temp_file_size', 'maxTempFileSize'),
    size('temp_file_write_size', 'tempFileWriteSize'),
    time('connect_timeout', 'connectTimeout'),
    time('read_timeout', 'readTimeout'),
    time('send_timeout', 'sendTimeout'),
    row('next_upstream', [1, Infinity], bitmask(target, 'nextUpstream', (w) => NEXT_WORDS[w], (mask) => (mask & FT.OFF ? FT.OFF : mask))),
    single('next_upstream_tries', 'nextUpstreamTries', countArg),
    time('next_upstream_timeout', 'nextUpstreamTimeout'),
    flag('ignore_client_abort', 'ignoreClientAbort'),
    flag('socket_keepalive', 'socketKeepalive'),
    row('bind', [1, 2], setting(target, 'bind', (cf, v) => (v === 'off' ? false : cv(cf, v)))),
    // ngx_http_set_complex_value_size_slot: a constant is checked now
    row('limit_rate', 1, setting(target, 'limitRate', (cf, text) => {
      const v = cv(cf, text);
      return v.constant === undefined ? v : sizeArg(cf, v.constant);
    })),
    row('store', 1, setting(target, 'store', parseStore)),
    row('store_access', [1, 3], unique(target, 'storeAccess', (_cf, node, c) => {
      const v = parseAccess(node.args);
      if (typeof v === 'string') return v;
      c.storeAccess = v;
    })),
    // accepted for compatibility, without effect (listed in docs/directives.md)
    row('send_lowat', 1, () => undefined),
    row('force_ranges', 'flag', () => undefined),
  ];
}

/**
 * The `prefix`_ssl_* rows (proxy, uwsgi): the location's SslConf, made on
 * first use; relative certificate paths resolve against the conf prefix.
 */
export function upstreamSslDirectives<R extends UpstreamModuleConf>(prefix: string, slot: ConfSlot<R, unknown>): Directive[] {
  const target = slot as unknown as ConfSlot<UpstreamModuleConf, unknown>;
  const sslConf = (cf: ConfContext): SslConf => {
    const s = (cf.get(target).ssl ??= {});
    s.confPrefix = cf.paths.confPrefix;
    return s;
  };
  return upstreamTlsDirectives(prefix, HTTP_ANY, sslConf, (cf) => httpMainOf(cf).variables);
}

const SSL_FIELDS = ['serverName', 'name', 'verify', 'verifyDepth', 'trustedCertificate', 'certificate',
  'certificateKey', 'passwordFile', 'sessionReuse', 'protocols', 'ciphers', 'crl', 'certificateCache', 'confCommands', 'confPrefix', 'files'] as const;

/** The *_ssl_* settings merge field by field (a level may set one and inherit the rest). */
export function mergeSsl(parent: UpstreamConf, child: UpstreamConf): void {
  if (!parent.ssl) return;
  const cs = (child.ssl ??= {}) as Record<string, unknown>;
  const ps = parent.ssl as Record<string, unknown>;
  for (const k of SSL_FIELDS) if (cs[k] === undefined) cs[k] = ps[k];
}

/**
 * The buffer figures of a merged location, with the checks and messages of
 * nginx's merge_loc_conf (`"fastcgi_buffers"`…); `tempDir` is the module's
 * default temp directory under the prefix (`proxy_temp`, `fastcgi_temp`).
 */
export function deriveBuffers(prefix: string, c: UpstreamConf & { buffers: { num: number; size: number }; bufferSize: number; maxTempFileSize: number },
  defaultTemp: string | undefined, tempDir: string, where: { file: string; line: number } | undefined): UpstreamDerived {
  const fail = (msg: string) => new ConfError(msg, where?.file, where?.line);
  const bufs = c.buffers;
  const p = prefix;
  if (bufs.num < 2) throw fail(`there must be at least 2 "${p}buffers"`);
  const size = Math.max(c.bufferSize, bufs.size);
  const busy = c.busyBuffersSize ?? 2 * size;
  const both = `the maximum of the value of "${p}buffer_size" and one of the "${p}buffers"`;
  if (busy < size) throw fail(`"${p}busy_buffers_size" must be equal to or greater than ${both}`);
  if (busy > (bufs.num - 1) * bufs.size) throw fail(`"${p}busy_buffers_size" must be less than the size of all "${p}buffers" minus one buffer`);
  const write = c.tempFileWriteSize ?? 2 * size;
  if (write < size) throw fail(`"${p}temp_file_write_size" must be equal to or greater than ${both}`);
  if (c.maxTempFileSize !== 0 && c.maxTempFileSize < size) {
    throw fail(`"${p}max_temp_file_size" must be equal to zero to disable temporary files usage or must be equal to or greater than ${both}`);
  }
  return { busyBuffersSize: busy, tempFileWriteSize: write, tempPath: c.tempPath ?? defaultTemp ?? defaultTempPath(tempDir) };
}

/** The lowercased upstream header names not passed to the client: the module's defaults, plus *_hide_header, less *_pass_header. */
export function hiddenHeaders(defaults: readonly string[], c: UpstreamModuleConf): Set<string> {
  const hidden = new Set(defaults);
  for (const h of c.hideHeaders ?? []) hidden.add(h.toLowerCase());
  for (const h of c.passHeaders ?? []) hidden.delete(h.toLowerCase());
  return hidden;
}

/** A level's place in the configuration, for merge-time errors. */
type Where = { file: string; line: number } | undefined;

/**
 * Runs a module's merge-time work (nginx's merge_loc_conf checks and derived
 * values) on every level of the http block, parents before children: each
 * call gets the level's merged configuration and its parent's result.
 */
export function finishLevels<C, D>(http: HttpMainConf, slot: ConfSlot<unknown, C>, finish: (c: C, parent: D | undefined, where: Where) => D): void {
  const walk = (list: Iterable<LocationConf>, parent: D) => {
    for (const loc of list) {
      const d = finish(loc.level.get(slot), parent, loc);
      walk(loc.children, d);
      if (loc.limitExcept) walk([loc.limitExcept.loc], d);
    }
  };
  const top = finish(http.level.get(slot), undefined, undefined);
  for (const srv of http.servers) {
    const sd = finish(srv.level.get(slot), top, srv);
    walk(srv.locations, sd);
    walk(srv.named.values(), sd);
  }
}

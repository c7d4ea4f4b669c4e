/**
 * ngx_http_gzip_filter_module with the core's gzip_* directives
 * (gzip_vary, gzip_http_version, gzip_proxied, gzip_disable). A response
 * that qualifies gets `Content-Encoding: gzip`, loses Content-Length and
 * Accept-Ranges, and its body goes through a streaming raw deflate wrapped
 * in nginx's own gzip header and trailer; backpressure passes through.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfSlot, MergedConf } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { boundedNumberArg, flagArg, sizeArg } from '../../conf/values.ts';
import { joinBodyFilter } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import { setting } from '../../conf/setters.ts';
import type { HttpModule } from '../http-conf.ts';
import { GZIP_BODY, gzipBody } from './gzip-body.ts';
import { compressionRatio } from './compressed-body.ts';
import type { CompressedBody } from './compressed-body.ts';
import { compileRegex } from '../regex.ts';
import type { HttpRequest } from '../request.ts';
import { parseHttpTime } from '../../core/http-time.ts';

interface GzipConf {
  enable?: boolean;
  level?: number;
  wbits?: number;
  memLevel?: number;
  minLength?: number;
  /** Lowercased MIME types; `*` matches any. text/html is always in. */
  types?: Set<string>;
  vary?: boolean;
  httpVersion?: '1.0' | '1.1';
  proxied?: Set<string>;
  disable?: Array<RegExp | 'msie6'>;
  buffers?: { count: number; size: number };
}

const GZIP_DEFAULTS = {
  enable: false, level: 1, wbits: 15, memLevel: 8, minLength: 20, types: new Set(['text/html']),
  vary: false, httpVersion: '1.1', proxied: new Set(['off']), disable: [],
} satisfies GzipConf;

const gzipSlot = defineSlot<GzipConf, typeof GZIP_DEFAULTS>('gzip', () => ({}), inheritUnset, GZIP_DEFAULTS);
/** The merged configuration run time reads. */
type Gzip = MergedConf<typeof gzipSlot>;


/** ngx_http_gzip_accept_encoding: "gzip" as a token, with a non-zero q if one is given. */
export function acceptsGzip(ae: string): boolean {
  if (ae.length < 4) return false;
  if (ae.startsWith('gzip,')) return true;
  let p = -1;
  let from = 0;
  const lower = ae.toLowerCase();
  for (;;) {
    p = lower.indexOf('gzip', from);
    if (p < 0) return false;
    if (p === 0 || ae[p - 1] === ',' || ae[p - 1] === ' ') break;
    from = p + 4;
  }
  p += 4;
  while (p < ae.length) {
    const c = ae[p++];
    if (c === ',') return true;
    if (c === ';') return quantityOk(ae, p);
    if (c !== ' ') return false;
  }
  return true;
}

function quantityOk(ae: string, p: number): boolean {
  while (p < ae.length) {
    const c = ae[p++];
    if (c === 'q' || c === 'Q') {
      if (p + 2 > ae.length || ae[p++] !== '=') return false;
      // ngx_http_gzip_quantity: 0.001 .. 1.000 enable, 0 / 0.000 / invalid disable
      const m = /^([01])(?:\.(\d{0,3}))?/.exec(ae.slice(p));
      if (!m) return false;
      const after = ae[p + m[0].length];
      if (after !== undefined && after !== ' ' && after !== ',') return false;
      const q = Number(m[1]) * 1000 + Number((m[2] ?? '').padEnd(3, '0'));
      return q > 0 && q <= 1000;
    }
    if (c !== ' ') return false;
  }
  return true;
}

function isMsie6(ua: string): boolean {
  const i = ua.indexOf('MSIE ');
  if (i < 0 || i + 7 >= ua.length || ua[i + 6] !== '.') return false;
  const v = ua[i + 5];
  return v === '4' || v === '5' || (v === '6' && !ua.includes('SV1', i + 8));
}

/** r.ctx key of the settings one request is compressed with, over the location's. */
const REQUEST_GZIP = {};

/**
 * From a header filter that runs before gzip's: this response is compressed
 * at `level` whatever the location says (APISIX-Runtime's set_gzip, which
 * the gateway's gzip plugin calls once it has checked types, length and
 * HTTP version itself); nginx's own conditions (Accept-Encoding, status,
 * Content-Encoding, gzip_proxied's default) still hold.
 */
export function useGzip(r: HttpRequest, level: number): void {
  r.ctx.set(REQUEST_GZIP, { ...r.level.get(gzipSlot), enable: true, level, minLength: 0, types: new Set(['*']), vary: false, httpVersion: '1.0' });
}

/** The settings of this request: its own, else the location's. */
function gzipConf(r: HttpRequest): Gzip {
  return (r.ctx.get(REQUEST_GZIP) as Gzip | undefined) ?? r.level.get(gzipSlot);
}

/** The answer of gzipOk for this request, once asked (nginx's r->gzip_tested and r->gzip_ok). */
const GZIP_TESTED = {};

/**
 * ngx_http_gzip_ok, asked once per request (gzip_static in the content
 * phase, then the gzip filter, get the same answer): a client's request
 * (not a subrequest) that asked for gzip, allowed by gzip_http_version,
 * gzip_proxied and gzip_disable.
 */
export function gzipTested(r: HttpRequest): boolean {
  let ok = r.ctx.get(GZIP_TESTED) as boolean | undefined;
  if (ok === undefined) {
    ok = r.parent === undefined && gzipOk(r, gzipConf(r));
    r.ctx.set(GZIP_TESTED, ok);
  }
  return ok;
}

/** Set once `Vary: Accept-Encoding` is among the headers (nginx's r->gzip_vary flag). */
const GZIP_VARY = {};

/**
 * nginx's r->gzip_vary: with `gzip_vary on`, the response says it varies by
 * Accept-Encoding, once, right after Connection where nginx writes it.
 */
export function markGzipVary(r: HttpRequest): void {
  if (!gzipConf(r).vary || r.ctx.has(GZIP_VARY)) return;
  r.ctx.set(GZIP_VARY, true);
  r.headersOut.unshift({ name: 'Vary', value: 'Accept-Encoding' });
}

/** The location's gzip_vary (gzip_static offers a .gz file only to clients that ask for gzip unless it is on). */
export function gzipVaryOn(r: HttpRequest): boolean {
  return r.level.get(gzipSlot).vary;
}

function gzipOk(r: HttpRequest, conf: Gzip): boolean {
  const ae = r.header('accept-encoding');
  if (ae === undefined || !acceptsGzip(ae)) return false;
  const ua = r.header('user-agent') ?? '';
  const disable = conf.disable;
  if (disable.includes('msie6') && isMsie6(ua)) return false;
  if (conf.httpVersion === '1.1' && r.httpVersion === '1.0') return false;
  if (r.header('via') !== undefined && !proxiedOk(r, conf.proxied)) return false;
  if (r.header('user-agent') !== undefined) {
    for (const d of disable) if (d !== 'msie6' && d.test(ua)) return false;
  }
  return true;
}

function proxiedOk(r: HttpRequest, p: Set<string>): boolean {
  if (p.has('off')) return false;
  if (p.has('any')) return true;
  if (r.header('authorization') !== undefined && p.has('auth')) return true;
  const expires = r.getHeader('expires');
  if (expires !== undefined) {
    if (!p.has('expired')) return false;
    const t = parseHttpTime(expires);
    return t !== -1 && t < Math.floor(Date.now() / 1000);
  }
  const cc = r.headersOut.filter((h) => h.name.toLowerCase() === 'cache-control').map((h) => h.value.toLowerCase());
  if (cc.length) {
    const has = (token: string) => cc.some((v) => v.split(',').some((x) => x.trim().split('=')[0] === token));
    return (p.has('no-cache') && has('no-cache')) || (p.has('no-store') && has('no-store'))
      || (p.has('private') && has('private'));
  }
  if (p.has('no_last_modified') && (r.lastModified !== undefined || r.getHeader('last-modified') !== undefined)) return false;
  if (p.has('no_etag') && r.getHeader('etag') !== undefined) return false;
  return true;
}

/** The response's Content-Type (without parameters) is one of `types` (`*`: any, even none); ngx_http_test_content_type. */
export function typeMatches(r: HttpRequest, types: Set<string>): boolean {
  if (types.has('*')) return true;
  const ct = r.contentType;
  if (!ct) return false;
  const semi = ct.indexOf(';');
  return types.has((semi >= 0 ? ct.slice(0, semi) : ct).trim().toLowerCase());
}

function gzipHeaderFilter(r: HttpRequest, body: BodyFilterEntry): void {
  const conf = gzipConf(r);
  if (!conf.enable) return;
  const status = r.status || 200;
  if (status !== 200 && status !== 403 && status !== 404) return;
  if (r.getHeader('content-encoding')) return;
  if (r.contentLength !== undefined && r.contentLength < conf.minLength) return;
  if (!typeMatches(r, conf.types)) return;
  markGzipVary(r);
  if (!gzipTested(r)) return;
  r.addHeader('Content-Encoding', 'gzip');
  const length = r.contentLength;
  r.contentLength = undefined;
  r.setHeader('Accept-Ranges', undefined);
  weakenEtag(r);
  if (r.method === 'HEAD') return;
  const { wbits, memLevel } = memoryFor(conf, length);
  // gzip_buffers 32 4k: nginx passes a buffer on once one is full
  r.ctx.set(GZIP_BODY, gzipBody(r, body, conf.level ?? 1, wbits, memLevel, conf.buffers?.size ?? 4096));
  joinBodyFilter(r, body);
}

/**
 * A `*_types` directive as ngx_http_types_slot reads it (ssi_types,
 * sub_filter_types, addition_types): repeated lines add up, text/html is
 * always in, `*` is any type, a type given twice is warned about.
 */
export function typesDirective<C extends { types?: Set<string> }>(name: string, slot: ConfSlot<C, unknown>): Directive {
  return {
    name, contexts: HTTP_ANY, args: [1, Infinity],
    handler(cf, node) {
      const c = cf.get(slot);
      if (c.types === undefined) c.types = new Set(['text/html']);
      for (const t of node.args) {
        const type = t.toLowerCase();
        if (c.types.has(type) && type !== '*') cf.warn(`duplicate MIME type "${t}"`);
        c.types.add(type);
      }
      return undefined;
    },
  };
}

/** ngx_http_weak_etag: a strong ETag becomes weak; anything else that is not quoted goes. */
export function weakenEtag(r: HttpRequest): void {
  const i = r.headersOut.findIndex((h) => h.name.toLowerCase() === 'etag');
  if (i < 0) return;
  const v = r.headersOut[i].value;
  if (v.length > 2 && v.startsWith('W/')) return;
  if (!v.startsWith('"')) r.headersOut.splice(i, 1);
  else r.headersOut[i] = { name: r.headersOut[i].name, value: 'W/' + v };
}

/**
 * A body filter is about to change the bytes (SSI, sub_filter): the length is
 * no longer known, and the validators go (ngx_http_clear_last_modified) or the
 * ETag becomes weak when `*_last_modified on` keeps them.
 */
export function clearForChangedBody(r: HttpRequest, keepLastModified: boolean): void {
  r.contentLength = undefined;
  r.setHeader('Content-Length', undefined);
  if (keepLastModified) {
    weakenEtag(r);
    return;
  }
  r.lastModified = undefined;
  r.setHeader('Last-Modified', undefined);
  r.setHeader('ETag', undefined);
}

/** Small known lengths get a smaller window and hash, as ngx_http_gzip_filter_memory does. */
function memoryFor(conf: Gzip, length: number | undefined): { wbits: number; memLevel: number } {
  let wbits = conf.wbits;
  let memLevel = conf.memLevel;
  if (length !== undefined && length > 0) {
    while (length < (1 << (wbits - 1)) - 262) { wbits--; memLevel--; }
    if (memLevel < 1) memLevel = 1;
  }
  // zlib takes 9 for a raw deflate window of 8
  return { wbits: Math.max(wbits, 9), memLevel };
}

/** `$gzip_ratio`: original size over compressed size. */
function gzipRatio(r: HttpRequest): string | undefined {
  return compressionRatio(r.ctx.get(GZIP_BODY) as CompressedBody | undefined);
}

const PROXIED = new Set(['off', 'expired', 'no-cache', 'no-store', 'private', 'no_last_modified', 'no_etag', 'auth', 'any']);

const directives: Directive[] = [
  { name: 'gzip', contexts: HTTP_ANY | Ctx.LIF, args: 'flag', handler: setting(gzipSlot, 'enable', flagArg) },
  {
    name: 'gzip_buffers', contexts: HTTP_ANY, args: 2,
    handler: setting(gzipSlot, 'buffers', (cf, _v, a) => {
      if (!/^\d+$/.test(a[0])) throw cf.error(`invalid value "${a[0]}"`);
      return { count: Number(a[0]), size: sizeArg(cf, a[1]) };
    }),
  },
  {
    name: 'gzip_types', contexts: HTTP_ANY, args: [1, Infinity],
    handler: setting(gzipSlot, 'types', (_cf, _v, a) => new Set(['text/html', ...a.map((t) => t.toLowerCase())])),
  },
  {
    name: 'gzip_comp_level', contexts: HTTP_ANY, args: 1,
    handler: setting(gzipSlot, 'level', boundedNumberArg(1, 9)),
  },
  {
    name: 'gzip_window', contexts: HTTP_ANY, args: 1,
    handler: setting(gzipSlot, 'wbits', (cf, _v, a) => {
      const size = sizeArg(cf, a[0]);
      const bits = Math.log2(size);
      if (!Number.isInteger(bits) || bits < 9 || bits > 15) throw cf.error('"gzip_window" directive must be 512, 1k, 2k, 4k, 8k, 16k, or 32k');
      return bits;
    }),
  },
  {
    name: 'gzip_hash', contexts: HTTP_ANY, args: 1,
    handler: setting(gzipSlot, 'memLevel', (cf, _v, a) => {
      const size = sizeArg(cf, a[0]);
      const bits = Math.log2(size);
      if (!Number.isInteger(bits) || bits < 9 || bits > 17) throw cf.error('"gzip_hash" directive must be 512, 1k, 2k, 4k, 8k, 16k, 32k, 64k, or 128k');
      return bits - 8;
    }),
  },
  { name: 'gzip_min_length', contexts: HTTP_ANY, args: 1, handler: setting(gzipSlot, 'minLength', sizeArg) },
  { name: 'gzip_vary', contexts: HTTP_ANY, args: 'flag', handler: setting(gzipSlot, 'vary', flagArg) },
  {
    name: 'gzip_http_version', contexts: HTTP_ANY, args: 1,
    handler: setting(gzipSlot, 'httpVersion', (cf, _v, a) => {
      if (a[0] !== '1.0' && a[0] !== '1.1') throw cf.error(`invalid value "${a[0]}" in "gzip_http_version" directive, it must be "1.0" or "1.1"`);
      return a[0];
    }),
  },
  {
    name: 'gzip_proxied', contexts: HTTP_ANY, args: [1, Infinity],
    handler: setting(gzipSlot, 'proxied', (cf, _v, a) => {
      for (const v of a) if (!PROXIED.has(v)) throw cf.error(`invalid value "${v}" in "gzip_proxied" directive`);
      return new Set(a);
    }),
  },
  {
    name: 'gzip_disable', contexts: HTTP_ANY, args: [1, Infinity],
    handler(cf, node) {
      const c = cf.get(gzipSlot);
      if (!Object.hasOwn(c, 'disable') || c.disable === undefined) c.disable = [];
      for (const v of node.args) c.disable.push(v === 'msie6' ? 'msie6' : compileRegex(cf, v, true).regex);
      return undefined;
    },
  },
  // accepted for compatibility; the deflate stream streams as it goes
  { name: 'postpone_gzipping', contexts: HTTP_ANY, args: 1, handler: (cf, node) => void sizeArg(cf, node.args[0]) },
  { name: 'gzip_no_buffer', contexts: HTTP_ANY, args: 'flag', handler: (cf, node) => void flagArg(cf, node.args[0]) },
];

export const gzipModule: HttpModule = {
  name: 'ngx_http_gzip_filter_module',
  directives,
  variables: [{ name: 'gzip_ratio', noCache: true, get: gzipRatio }],
  postconfiguration(http) {
    // nginx's gzip filter position: after ssi (1300) and postpone (1400), before range (1600)
    const body = http.addBodyFilter(1500, (r, chunk, eof) => (r.ctx.get(GZIP_BODY) as CompressedBody).write(chunk, eof),
      (r) => (r.ctx.get(GZIP_BODY) as CompressedBody).resume());
    http.addHeaderFilter(1500, (r) => gzipHeaderFilter(r, body));
  },
};

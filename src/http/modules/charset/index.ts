/**
 * ngx_http_charset_filter_module: `charset`, `source_charset`,
 * `override_charset`, `charset_types`, `charset_map`. The response's
 * Content-Type gets `; charset=name` for charset_types, and the body is
 * recoded (recode.ts) when the source charset differs and a charset_map
 * joins the two. nginx keeps the type and its charset apart
 * (r->headers_out.charset); here the Content-Type is one string, read the
 * way nginx reads an upstream's (the `charset=` parameter is the response's
 * charset). Proxied responses may name the charset to recode to in
 * `X-Accel-Charset` (overrideCharset). The shipped maps (nginx's conf/koi-utf,
 * koi-win, win-utf, Debian's /etc/nginx/…) are read with `include`.
 */
import { defineSlot } from '../../../conf/context.ts';
import type { ConfContext, MergedConf } from '../../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../../conf/directive.ts';
import type { ConfNode } from '../../../conf/parser.ts';
import { ConfError } from '../../../conf/errors.ts';
import { flagArg } from '../../../conf/values.ts';
import { setting } from '../../../conf/setters.ts';
import { joinBodyFilter, nextBodyFilter } from '../../body-filter.ts';
import type { BodyFilterEntry } from '../../body-filter.ts';
import { httpMainOf } from '../../http-conf.ts';
import type { HttpMainConf, HttpModule } from '../../http-conf.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { compileComplex } from '../../../core/variables.ts';
import type { ComplexValue } from '../../../core/variables.ts';
import { Recoder, addMapLine, newTables } from './recode.ts';
import type { RecodeTable } from './recode.ts';

/** A charset named in the configuration; `tables` recode to others, by their lowercased name. */
interface Charset {
  /** As first written (nginx names a charset by its first spelling). */
  name: string;
  utf8: boolean;
  tables: Map<string, RecodeTable>;
}

/** The http block's charsets (nginx's main conf): every name written, and the maps between them. */
interface Charsets {
  byName: Map<string, Charset>;
  /** `src dst` pairs some location recodes between, checked for a map after the block is read. */
  recodes: Map<string, [string, string]>;
}

const registries = new WeakMap<HttpMainConf, Charsets>();

function charsetsOf(http: HttpMainConf): Charsets {
  let c = registries.get(http);
  if (!c) registries.set(http, (c = { byName: new Map(), recodes: new Map() }));
  return c;
}

/** ngx_http_add_charset: the charset of this name (without case), added when new. */
function addCharset(cs: Charsets, name: string): Charset {
  const key = name.toLowerCase();
  let c = cs.byName.get(key);
  if (!c) cs.byName.set(key, (c = { name, utf8: key === 'utf-8', tables: new Map() }));
  return c;
}

/** `off` (charset only), a name, or a variable holding one. */
type CharsetRef = 'off' | { name: string } | { value: ComplexValue };

interface CharsetConf {
  charset?: CharsetRef;
  source?: CharsetRef;
  override?: boolean;
  /** Lowercased types; `*` for any. */
  types?: Set<string>;
  /** The http block's charsets, for the merge's record of recodes. */
  charsets?: Charsets;
}

const DEFAULT_TYPES = ['text/html', 'text/xml', 'text/plain', 'text/vnd.wap.wml', 'application/javascript', 'application/rss+xml'];

const charsetSlot = defineSlot<CharsetConf, { charset: 'off'; source: 'off'; override: false; types: Set<string> }>('charset', () => ({}),
  (parent, child) => {
    child.charset ??= parent.charset;
    child.source ??= parent.source;
    child.override ??= parent.override;
    child.types ??= parent.types;
    child.charsets ??= parent.charsets;
    // ngx_http_charset_merge_loc_conf: two fixed, different charsets need a map (checked after the block)
    const { charset, source, charsets } = child;
    if (charsets && typeof charset === 'object' && 'name' in charset && typeof source === 'object' && 'name' in source
      && charset.name.toLowerCase() !== source.name.toLowerCase()) {
      charsets.recodes.set(`${source.name.toLowerCase()}\n${charset.name.toLowerCase()}`, [source.name, charset.name]);
    }
  },
  { charset: 'off', source: 'off', override: false, types: new Set(DEFAULT_TYPES) });

/** ngx_http_set_charset_slot: `off` (for `charset` only, as written), `$variable`, or a name. */
function charsetArg(field: 'charset' | 'source') {
  return setting(charsetSlot, field, (cf: ConfContext, v: string): CharsetRef => {
    const http = httpMainOf(cf);
    const cs = charsetsOf(http);
    cf.get(charsetSlot).charsets = cs;
    if (field === 'charset' && v === 'off') return 'off';
    if (v.startsWith('$')) return { value: compileComplex(cf, http.variables, v) };
    return { name: addCharset(cs, v).name };
  });
}

/**
 * ngx_http_types_slot: text/html (the first default) plus the types given;
 * `*` is any type, and later lines add nothing to it. The defaults in full
 * apply only where no level sets charset_types.
 */
function charsetTypes(cf: ConfContext, node: ConfNode): string | undefined {
  const c = cf.get(charsetSlot);
  if (c.types?.has('*')) return undefined;
  c.types ??= new Set([DEFAULT_TYPES[0]]);
  for (const t of node.args) {
    if (t === '*') {
      c.types = new Set(['*']);
      return undefined;
    }
    const type = t.toLowerCase();
    if (c.types.has(type)) cf.warn(`duplicate MIME type "${type}"`);
    c.types.add(type);
  }
  return undefined;
}

/** ngx_http_charset_map_block: `charset_map src dst { byte byte; ... }`, utf-8 only as dst. */
function charsetMap(cf: ConfContext, node: ConfNode): string | undefined {
  const cs = charsetsOf(httpMainOf(cf));
  const [srcName, dstName] = node.args;
  const src = addCharset(cs, srcName);
  const dst = addCharset(cs, dstName);
  if (src === dst) throw cf.error(`"charset_map" between the same charsets "${srcName}" and "${dstName}"`);
  if (srcName.toLowerCase() === 'utf-8') throw cf.error('"charset_map" with "utf-8" charset should be given in the second column');
  const srcKey = srcName.toLowerCase();
  const dstKey = dstName.toLowerCase();
  if (src.tables.has(dstKey) || dst.tables.has(srcKey)) throw cf.error(`duplicate "charset_map" between "${srcName}" and "${dstName}"`);
  const tables = newTables(dstKey === 'utf-8');
  src.tables.set(dstKey, tables.there);
  dst.tables.set(srcKey, tables.back);
  const saved = cf.node;
  try {
    for (const line of node.children ?? []) {
      cf.node = line;
      if (line.children) throw cf.error('unexpected "{"');
      if (line.args.length !== 1) throw cf.error('invalid parameters number');
      const bad = addMapLine(tables, line.name, line.args[0]);
      if (bad !== undefined) throw cf.error(`invalid value "${bad}"`);
    }
  } finally {
    cf.node = saved;
  }
  return undefined;
}

/** ngx_http_charset_postconfiguration's check: every recode a location asks for has a map. */
function checkRecodes(http: HttpMainConf): void {
  const cs = registries.get(http);
  if (!cs) return;
  for (const [src, dst] of cs.recodes.values()) {
    if (!cs.byName.get(src.toLowerCase())?.tables.has(dst.toLowerCase())) {
      throw new ConfError(`no "charset_map" between the charsets "${src}" and "${dst}"`);
    }
  }
}

/** A response's Content-Type as nginx reads an upstream's: the type, and the `charset=` parameter when there is one. */
function splitContentType(ct: string): { type: string; charset: string | undefined } {
  for (let p = ct.indexOf(';'); p >= 0; p = ct.indexOf(';', p + 1)) {
    let q = p + 1;
    while (ct[q] === ' ') q++;
    if (q === ct.length) break;
    if (ct.slice(q, q + 8).toLowerCase() !== 'charset=') continue;
    let value = ct.slice(q + 8);
    if (value.startsWith('"')) value = value.slice(1);
    if (value.endsWith('"')) value = value.slice(0, -1);
    return { type: ct.slice(0, p), charset: value };
  }
  return { type: ct, charset: undefined };
}

/** The charset an upstream named in X-Accel-Charset (nginx's r->headers_out.override_charset). */
const OVERRIDE = {};

/** The proxy's X-Accel-Charset: the charset to recode this response to, whatever the location says. */
export function overrideCharset(r: HttpRequest, name: string): void {
  r.ctx.set(OVERRIDE, name);
}

/** A name from the configuration or a variable; undefined for an empty variable. */
function refName(r: HttpRequest, cs: Charsets, ref: { name: string } | { value: ComplexValue }): string | undefined {
  if ('name' in ref) return cs.byName.get(ref.name.toLowerCase())?.name ?? ref.name;
  return ref.value.evaluate(r) || undefined;
}

/** ngx_http_destination_charset: the charset this client's response is to be in, if any. */
function destination(r: HttpRequest, conf: MergedConf<typeof charsetSlot>, cs: Charsets, own: string | undefined): string | undefined {
  const override = r.ctx.get(OVERRIDE) as string | undefined;
  if (override) {
    if (cs.byName.has(override.toLowerCase())) return override;
    requestLog(r).error(`unknown charset "${override}" to override`);
    return undefined;
  }
  if (conf.charset === 'off') return undefined;
  if (own !== undefined ? !conf.override : !typeIn(conf.types, r.contentType ?? '')) return undefined;
  return refName(r, cs, conf.charset);
}

/** ngx_http_test_content_type: the whole Content-Type (it names no charset here), without case. */
function typeIn(types: Set<string>, contentType: string): boolean {
  return types.has('*') || types.has(contentType.toLowerCase());
}

/** The client's request, whose charset a subrequest's body is recoded to. */
function mainRequest(r: HttpRequest): HttpRequest {
  let m = r;
  while (m.parent) m = m.parent;
  return m;
}

/**
 * ngx_http_set_charset: the Content-Type says `dst` (a subrequest's is not
 * sent; a 301/302 says none, as nginx drops it for old browsers).
 */
function setCharset(r: HttpRequest, base: string, hasCharset: boolean, dst: string): void {
  if (r.parent) return;
  const status = r.status || 200;
  if (status === 301 || status === 302) r.contentType = base;
  else r.contentType = hasCharset ? base : `${base}; charset=${dst}`;
}

const NO_CHARSETS: Charsets = { byName: new Map(), recodes: new Map() };

/** The per-response recoder. */
const RECODER = {};

function charsetHeaderFilter(r: HttpRequest, body: BodyFilterEntry): void {
  const ct = r.contentType;
  if (!ct) return;
  const conf = r.level.get(charsetSlot);
  // the common case: nothing to say about this response
  if (conf.charset === 'off' && r.parent === undefined && !r.ctx.has(OVERRIDE)) return;
  const cs = registries.get(r.main) ?? NO_CHARSETS;
  const own = splitContentType(ct);
  const dst = r.parent === undefined ? destination(r, conf, cs, own.charset) : splitContentType(mainRequest(r).contentType ?? '').charset;
  if (dst === undefined) return;
  let src: string | undefined;
  if (own.charset !== undefined) src = own.charset;
  else if (conf.source === 'off') {
    setCharset(r, ct, false, dst);
    return;
  } else src = refName(r, cs, conf.source);
  if (src === undefined) return;
  const dstSet = cs.byName.get(dst.toLowerCase());
  const srcSet = cs.byName.get(src.toLowerCase());
  const noMap = () => requestLog(r).error(`no "charset_map" between the charsets "${src}" and "${dst}"`);
  if (!dstSet || !srcSet) {
    // names nginx does not know are fine when they are the same name
    if (dstSet !== srcSet || !src.toLowerCase().startsWith(dst.toLowerCase())) return noMap();
    setCharset(r, ct, own.charset !== undefined, dst);
    return;
  }
  if (srcSet === dstSet) {
    setCharset(r, own.type, false, dst);
    return;
  }
  // an encoded body cannot be recoded (gzip_static's .gz, an upstream's gzip): the header stays as it was
  if (r.getHeader('content-encoding')) return;
  const table = srcSet.tables.get(dst.toLowerCase());
  if (!table) return noMap();
  setCharset(r, own.type, false, dst);
  if (table.kind !== 'bytes' && r.parent === undefined) {
    r.contentLength = undefined;
    r.setHeader('Content-Length', undefined);
  }
  r.ctx.set(RECODER, new Recoder(table));
  joinBodyFilter(r, body);
}

function charsetBodyFilter(r: HttpRequest, chunk: Buffer, eof: boolean, self: BodyFilterEntry): boolean {
  return nextBodyFilter(r, self, (r.ctx.get(RECODER) as Recoder).recode(chunk), eof);
}

export const charsetModule: HttpModule = {
  name: 'ngx_http_charset_filter_module',
  directives: [
    { name: 'charset', contexts: HTTP_ANY | Ctx.LIF, args: 1, handler: charsetArg('charset') },
    { name: 'source_charset', contexts: HTTP_ANY | Ctx.LIF, args: 1, handler: charsetArg('source') },
    { name: 'override_charset', contexts: HTTP_ANY | Ctx.LIF, args: 'flag', handler: setting(charsetSlot, 'override', flagArg) },
    { name: 'charset_types', contexts: HTTP_ANY, args: [1, Infinity], handler: charsetTypes },
    { name: 'charset_map', contexts: Ctx.HTTP, args: 2, block: true, handler: charsetMap },
  ],
  postconfiguration(http) {
    checkRecodes(http);
    // nginx's charset filter position: after sub (900), before ssi (1300) and gzip (1500)
    const body: BodyFilterEntry = http.addBodyFilter(1200, (r, chunk, eof) => charsetBodyFilter(r, chunk, eof, body));
    http.addHeaderFilter(1200, (r) => charsetHeaderFilter(r, body), { subrequests: true });
  },
};

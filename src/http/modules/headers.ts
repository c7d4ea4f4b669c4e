/**
 * ngx_http_headers_filter_module: `add_header`, `expires` and `add_trailer`.
 * Values are compiled once; a level with its own add_header (or
 * add_trailer) list inherits none of the outer ones, as in nginx.
 */
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { parseTime } from '../../conf/values.ts';
import { joinBodyFilter, nextBodyFilter } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import { listOf } from '../../conf/setters.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { httpDate } from '../response.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { coreLoc } from '../core/settings.ts';
import { parseHttpTime } from '../../core/http-time.ts';

type ExpiresKind = 'off' | 'epoch' | 'max' | 'access' | 'modified' | 'daily';

interface Expires {
  kind: ExpiresKind;
  /** Seconds (offset, or time of day for `daily`); may be negative. */
  time: number;
}

/** How an added header lands among the response headers (ngx_http_set_headers). */
type HeaderKind = 'add' | 'multi' | 'last-modified' | 'etag';

interface HeaderValue {
  name: string;
  kind: HeaderKind;
  /** undefined for an empty value (nothing is sent, or the header is removed). */
  value: ComplexValue | undefined;
  always: boolean;
}

interface HeadersConf {
  expires?: Expires;
  /** `expires` with variables: parsed per request. */
  expiresValue?: { modified: boolean; value: ComplexValue };
  headers?: HeaderValue[];
  trailers?: HeaderValue[];
}

const headersSlot = defineSlot<HeadersConf>('headers', () => ({}), (parent, child) => {
  if (child.expires === undefined && child.expiresValue === undefined) {
    child.expires = parent.expires;
    child.expiresValue = parent.expiresValue;
  }
  child.headers ??= parent.headers;
  child.trailers ??= parent.trailers;
});

/** Statuses that get headers without `always` (and `expires`). */
const SAFE_STATUS = new Set([200, 201, 204, 206, 301, 302, 303, 304, 307, 308]);

/** ngx_http_parse_expires: the parsed value or an error message. */
function parseExpires(text: string, modified: boolean): Expires | string {
  if (!modified) {
    if (text === 'epoch') return { kind: 'epoch', time: 0 };
    if (text === 'max') return { kind: 'max', time: 0 };
    if (text === 'off') return { kind: 'off', time: 0 };
  }
  let kind: ExpiresKind = modified ? 'modified' : 'access';
  let v = text;
  let minus = false;
  if (v[0] === '@') {
    v = v.slice(1);
    if (modified) return 'daily time cannot be used with "modified" parameter';
    kind = 'daily';
  } else if (v[0] === '+') {
    v = v.slice(1);
  } else if (v[0] === '-') {
    v = v.slice(1);
    minus = true;
  }
  // in seconds, as ngx_parse_time(…, 1): `1y` and `1M` count, `ms` does not
  const time = parseTime(v, true);
  if (Number.isNaN(time)) return 'invalid value';
  if (kind === 'daily' && time > 24 * 60 * 60) return 'daily time value must be less than 24 hours';
  return { kind, time: minus ? -time : time };
}

function expiresDirective(cf: ConfContext, node: ConfNode): string | undefined {
  const c = cf.get(headersSlot);
  // hand-written: expires stores one of two fields (a parsed value, or one with variables)
  if (Object.hasOwn(c, 'expires') && (c.expires !== undefined || c.expiresValue !== undefined)) return 'is duplicate';
  let modified = false;
  let arg = node.args[0];
  if (node.args.length === 2) {
    if (node.args[0] !== 'modified') return 'invalid value';
    modified = true;
    arg = node.args[1];
  }
  const value = compileComplex(cf, httpMainOf(cf).variables, arg);
  if (value.constant === undefined) {
    c.expiresValue = { modified, value };
    return undefined;
  }
  const parsed = parseExpires(arg, modified);
  if (typeof parsed === 'string') return parsed;
  c.expires = parsed;
  return undefined;
}

function headerKind(name: string): HeaderKind {
  switch (name.toLowerCase()) {
    case 'cache-control': case 'link': return 'multi';
    case 'last-modified': return 'last-modified';
    case 'etag': return 'etag';
    default: return 'add';
  }
}

function addDirective(field: 'headers' | 'trailers') {
  return listOf(headersSlot, field, (cf, node) => {
    const [name, text, flag] = node.args;
    if (flag !== undefined && flag !== 'always') throw cf.error(`invalid parameter "${flag}"`);
    return {
      name,
      kind: field === 'headers' ? headerKind(name) : 'add',
      value: text === '' ? undefined : compileComplex(cf, httpMainOf(cf).variables, text),
      always: flag === 'always',
    };
  });
}

/** Time of day `secs` (local time) next: today if still ahead, else tomorrow (ngx_next_time). */
function nextTime(secs: number, nowSec: number): number {
  const d = new Date(nowSec * 1000);
  d.setHours(Math.floor(secs / 3600), Math.floor((secs % 3600) / 60), secs % 60, 0);
  let next = Math.floor(d.getTime() / 1000);
  if (next - nowSec > 0) return next;
  d.setDate(d.getDate() + 1);
  next = Math.floor(d.getTime() / 1000);
  return next;
}

/** Sets Expires and Cache-Control (ngx_http_set_expires), reusing headers already there. */
function setExpires(r: HttpRequest, conf: HeadersConf): void {
  let exp = conf.expires;
  if (conf.expiresValue) {
    const parsed = parseExpires(conf.expiresValue.value.evaluate(r), conf.expiresValue.modified);
    if (typeof parsed === 'string' || parsed.kind === 'off') return;
    exp = parsed;
  }
  if (!exp || exp.kind === 'off') return;
  let expires: string;
  let cacheControl: string;
  if (exp.kind === 'epoch') {
    expires = 'Thu, 01 Jan 1970 00:00:01 GMT';
    cacheControl = 'no-cache';
  } else if (exp.kind === 'max') {
    expires = 'Thu, 31 Dec 2037 23:55:55 GMT';
    cacheControl = 'max-age=315360000';
  } else if (exp.time === 0 && exp.kind !== 'daily') {
    expires = httpDate();
    cacheControl = 'max-age=0';
  } else {
    const now = Math.floor(Date.now() / 1000);
    let at: number;
    let maxAge: number;
    let modifiedSec = -1;
    if (exp.kind === 'daily') {
      at = nextTime(exp.time, now);
      maxAge = at - now;
    } else if (exp.kind === 'access' || (modifiedSec = lastModifiedSec(r)) < 0) {
      maxAge = exp.time;
      at = now + exp.time;
    } else {
      at = modifiedSec + exp.time;
      maxAge = at - now;
    }
    expires = new Date(at * 1000).toUTCString();
    cacheControl = exp.time < 0 || maxAge < 0 ? 'no-cache' : `max-age=${maxAge}`;
  }
  replaceOrAdd(r, 'Expires', expires);
  // the first Cache-Control keeps its place and takes the value; any others go
  let first = -1;
  for (let i = 0; i < r.headersOut.length; i++) {
    if (r.headersOut[i].name.toLowerCase() !== 'cache-control') continue;
    if (first < 0) first = i;
    else r.headersOut.splice(i--, 1);
  }
  if (first >= 0) r.headersOut[first].value = cacheControl;
  else r.addHeader('Cache-Control', cacheControl);
}

/** Sets header `name` in place when present, else appends it; undefined removes it. */
function replaceOrAdd(r: HttpRequest, name: string, value: string | undefined): void {
  const lower = name.toLowerCase();
  const i = r.headersOut.findIndex((h) => h.name.toLowerCase() === lower);
  if (value === undefined) {
    if (i >= 0) r.headersOut.splice(i, 1);
  } else if (i >= 0) {
    r.headersOut[i] = { name, value };
  } else {
    r.addHeader(name, value);
  }
}

function applyHeader(r: HttpRequest, h: HeaderValue): void {
  const value = h.value ? h.value.evaluate(r) : '';
  switch (h.kind) {
    case 'add':
    case 'multi':
      if (value) r.addHeader(h.name, value);
      return;
    case 'etag':
      replaceOrAdd(r, h.name, value || undefined);
      return;
    case 'last-modified': {
      // sent as written, where nginx sends it: among the added headers
      r.lastModified = undefined;
      replaceOrAdd(r, h.name, value || undefined);
      return;
    }
  }
}

/** The trailers to send, evaluated when the body ends. */
const TRAILERS = {};

function headersFilter(r: HttpRequest): void {
  const conf = r.level.get(headersSlot);
  const hasExpires = conf.expiresValue !== undefined || (conf.expires !== undefined && conf.expires.kind !== 'off');
  if (!hasExpires && !conf.headers && !conf.trailers) return;
  const safe = SAFE_STATUS.has(r.status || 200);
  if (hasExpires && safe) setExpires(r, conf);
  if (conf.headers) for (const h of conf.headers) if (safe || h.always) applyHeader(r, h);
  if (conf.trailers && conf.trailers.some((t) => safe || t.always)) expectTrailers(r, conf.trailers, safe);
}

/** Set by the headers filter when trailers are due on this response. */
const EXPECT_TRAILERS = {};

/** Trailers are sent (nginx's r->expect_trailers): the chunked filter makes the body chunked. */
function expectTrailers(r: HttpRequest, trailers: HeaderValue[], safe: boolean): void {
  r.ctx.set(EXPECT_TRAILERS, { trailers, safe });
  r.sink.expectTrailers?.();
}

/**
 * The part of nginx's chunked filter that concerns trailers: its header
 * filter runs after the range filter and drops the length so the body is
 * chunked; its body filter evaluates the trailers when the body ends.
 */
function chunkedTrailersFilter(r: HttpRequest, body: BodyFilterEntry): void {
  const expect = r.ctx.get(EXPECT_TRAILERS) as { trailers: HeaderValue[]; safe: boolean } | undefined;
  if (!expect) return;
  const status = r.status || 200;
  if (r.method === 'HEAD' || status === 204 || status === 304 || r.httpVersion === '1.0') return;
  if (!(r.level.get(coreLoc).chunkedTransferEncoding ?? true)) return;
  r.contentLength = undefined;
  r.ctx.set(TRAILERS, []);
  joinBodyFilter(r, body);
}

function chunkedTrailersBody(r: HttpRequest, chunk: Buffer, eof: boolean, self: BodyFilterEntry): boolean {
  if (eof) {
    const expect = r.ctx.get(EXPECT_TRAILERS) as { trailers: HeaderValue[]; safe: boolean };
    const sent = r.ctx.get(TRAILERS) as Array<[string, string]>;
    for (const t of expect.trailers) {
      if (!expect.safe && !t.always) continue;
      const v = t.value ? t.value.evaluate(r) : '';
      if (v) sent.push([t.name, v]);
    }
    if (sent.length) r.sink.setTrailers(sent.flat());
  }
  return nextBodyFilter(r, self, chunk, eof);
}

export const headersModule: HttpModule = {
  name: 'ngx_http_headers_filter_module',
  directives: [
    { name: 'expires', contexts: HTTP_ANY | Ctx.LIF, args: [1, 2], handler: expiresDirective },
    { name: 'add_header', contexts: HTTP_ANY | Ctx.LIF, args: [2, 3], handler: addDirective('headers') },
    { name: 'add_trailer', contexts: HTTP_ANY | Ctx.LIF, args: [2, 3], handler: addDirective('trailers') },
  ],
  variables: [
    {
      name: 'sent_trailer_', prefix: true, noCache: true,
      get(r, name) {
        const want = name.slice('sent_trailer_'.length).replace(/_/g, '-');
        const sent = r.ctx.get(TRAILERS) as Array<[string, string]> | undefined;
        const found = sent?.filter(([k]) => k.toLowerCase() === want).map(([, v]) => v);
        return found?.length ? found.join(', ') : undefined;
      },
    },
  ],
  postconfiguration(http) {
    // nginx's headers filter position (see http-conf.ts)
    http.addHeaderFilter(500, headersFilter);
    // the trailers half of nginx's chunked filter (1800): after range, just before the head is written
    const body: BodyFilterEntry = http.addBodyFilter(1800, (r, chunk, eof) => chunkedTrailersBody(r, chunk, eof, body));
    http.addHeaderFilter(1800, (r) => chunkedTrailersFilter(r, body));
  },
};

/**
 * The response's modification time in seconds, or -1: our own (static files)
 * or a Last-Modified header passed on as written (proxied responses keep the
 * upstream's field in its place, as nginx does, and nginx still knows its time).
 */
function lastModifiedSec(r: HttpRequest): number {
  if (r.lastModified !== undefined) return Math.floor(r.lastModified / 1000);
  const passed = r.getHeader('last-modified');
  return passed === undefined ? -1 : parseHttpTime(passed);
}

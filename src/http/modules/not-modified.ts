/**
 * ngx_http_not_modified_filter_module: conditional requests on a 200
 * response — If-Unmodified-Since and If-Match (412), If-Modified-Since and
 * If-None-Match (304) — and `if_modified_since off|exact|before` (core).
 * Also nginx's HTTP date parser (ngx_parse_http_time) and the helper that
 * lets a header filter replace the response with one of nginx's pages.
 */
import { Writable } from 'node:stream';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { specialPage } from '../special-response.ts';
import { coreLoc } from './core/settings.ts';

const MDAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function digit(s: string, i: number): number {
  const c = s.charCodeAt(i) - 48;
  return c >= 0 && c <= 9 ? c : -1;
}

function twoDigits(s: string, i: number): number {
  const a = digit(s, i);
  const b = digit(s, i + 1);
  return a < 0 || b < 0 ? -1 : a * 10 + b;
}

/**
 * Seconds since the epoch for an HTTP date in RFC 1123, RFC 850 or asctime
 * form, or -1 (ngx_parse_http_time, equally strict).
 */
export function parseHttpTime(value: string): number {
  const end = value.length;
  let fmt: 'rfc822' | 'rfc850' | 'isoc' | '' = '';
  let p = 0;
  for (; p < end; p++) {
    if (value[p] === ',') break;
    if (value[p] === ' ') { fmt = 'isoc'; break; }
  }
  for (p++; p < end; p++) if (value[p] !== ' ') break;
  if (end - p < 18) return -1;
  let day = 0;
  let year = 0;
  if (fmt !== 'isoc') {
    day = twoDigits(value, p);
    if (day < 0) return -1;
    p += 2;
    if (value[p] === ' ') {
      if (end - p < 18) return -1;
      fmt = 'rfc822';
    } else if (value[p] === '-') fmt = 'rfc850';
    else return -1;
    p++;
  }
  let month: number;
  switch (value[p]) {
    case 'J': month = value[p + 1] === 'a' ? 0 : value[p + 2] === 'n' ? 5 : 6; break;
    case 'F': month = 1; break;
    case 'M': month = value[p + 2] === 'r' ? 2 : 4; break;
    case 'A': month = value[p + 1] === 'p' ? 3 : 7; break;
    case 'S': month = 8; break;
    case 'O': month = 9; break;
    case 'N': month = 10; break;
    case 'D': month = 11; break;
    default: return -1;
  }
  p += 3;
  if ((fmt === 'rfc822' && value[p] !== ' ') || (fmt === 'rfc850' && value[p] !== '-')) return -1;
  p++;
  if (fmt === 'rfc822') {
    const hi = twoDigits(value, p);
    const lo = twoDigits(value, p + 2);
    if (hi < 0 || lo < 0) return -1;
    year = hi * 100 + lo;
    p += 4;
  } else if (fmt === 'rfc850') {
    year = twoDigits(value, p);
    if (year < 0) return -1;
    year += year < 70 ? 2000 : 1900;
    p += 2;
  }
  if (fmt === 'isoc') {
    if (value[p] === ' ') p++;
    const d = digit(value, p++);
    if (d < 0) return -1;
    day = d;
    if (value[p] !== ' ') {
      const d2 = digit(value, p++);
      if (d2 < 0) return -1;
      day = day * 10 + d2;
    }
    if (end - p < 14) return -1;
  }
  if (value[p++] !== ' ') return -1;
  const hour = twoDigits(value, p);
  if (hour < 0) return -1;
  p += 2;
  if (value[p++] !== ':') return -1;
  const min = twoDigits(value, p);
  if (min < 0) return -1;
  p += 2;
  if (value[p++] !== ':') return -1;
  const sec = twoDigits(value, p);
  if (sec < 0) return -1;
  if (fmt === 'isoc') {
    p += 2;
    if (value[p++] !== ' ') return -1;
    const hi = twoDigits(value, p);
    const lo = twoDigits(value, p + 2);
    if (hi < 0 || lo < 0) return -1;
    year = hi * 100 + lo;
  }
  if (hour > 23 || min > 59 || sec > 59) return -1;
  if (day === 29 && month === 1) {
    if ((year & 3) || (year % 100 === 0 && year % 400 !== 0)) return -1;
  } else if (day > MDAYS[month]) return -1;
  // Gauss' formula, with the year starting on March 1
  if (--month <= 0) { month += 12; year -= 1; }
  const days = 365 * year + Math.floor(year / 4) - Math.floor(year / 100) + Math.floor(year / 400)
    + Math.floor(367 * month / 12) - 30 + day - 1 - 719527 + 31 + 28;
  return days * 86400 + hour * 3600 + min * 60 + sec;
}

/** Marks that a filter replaced the body (412, 416): content handlers may skip producing theirs. */
const REPLACED = {};

export function bodyReplaced(r: HttpRequest): boolean {
  return r.ctx.has(REPLACED);
}

/**
 * Turns the response whose head is being sent into nginx's page for
 * `status` (ngx_http_filter_finalize_request): the handler's body is
 * discarded and the page is sent in its place.
 */
export function replaceWithPage(r: HttpRequest, status: number, keepHeaders = false): void {
  const core = r.level.get(coreLoc);
  const ua = r.header('user-agent') ?? '';
  const page = specialPage(status, core.serverTokens, core.msiePadding && ua.includes('MSIE ')) ?? '';
  if (!keepHeaders) r.headersOut.length = 0;
  else r.setHeader('ETag', undefined);
  r.status = status;
  r.lastModified = undefined;
  r.location = undefined;
  r.contentType = page ? 'text/html' : undefined;
  r.contentLength = page.length;
  r.ctx.set(REPLACED, true);
  const out = r.out;
  r.out = new Writable({
    write(_chunk, _enc, cb) { cb(); },
    final(cb) {
      out.end(page, 'latin1');
      cb();
    },
  });
}

/** Whether `etag` is in the If-Match/If-None-Match list (ngx_http_test_if_match). */
export function etagMatches(list: string, etagValue: string | undefined, weak: boolean): boolean {
  if (list === '*') return true;
  if (etagValue === undefined) return false;
  let etag = etagValue;
  if (weak && etag.length > 2 && etag.startsWith('W/')) etag = etag.slice(2);
  let p = 0;
  const end = list.length;
  while (p < end) {
    if (weak && end - p > 2 && list[p] === 'W' && list[p + 1] === '/') p += 2;
    if (etag.length > end - p) return false;
    if (list.startsWith(etag, p)) {
      p += etag.length;
      while (p < end && (list[p] === ' ' || list[p] === '\t')) p++;
      if (p === end || list[p] === ',') return true;
    }
    while (p < end && list[p] !== ',') p++;
    while (p < end && (list[p] === ' ' || list[p] === '\t' || list[p] === ',')) p++;
  }
  return false;
}

/** Last-Modified of the response in seconds, or -1. */
function lastModifiedSec(r: HttpRequest): number {
  return r.lastModified === undefined ? -1 : Math.floor(r.lastModified / 1000);
}

const NOT_MODIFIED_OFF = {};

/** nginx's r->disable_not_modified: the upstream module sets it for a response it does not cache. */
export function disableNotModified(r: HttpRequest): void {
  r.ctx.set(NOT_MODIFIED_OFF, true);
}

function notModifiedFilter(r: HttpRequest): void {
  if (r.status !== 200 || r.ctx.has(NOT_MODIFIED_OFF)) return;
  const h = r.req.headers;
  const ius = h['if-unmodified-since'];
  if (ius !== undefined) {
    const lm = lastModifiedSec(r);
    if (lm === -1 || parseHttpTime(ius) < lm) return replaceWithPage(r, 412);
  }
  const im = h['if-match'];
  if (im !== undefined && !etagMatches(im, r.getHeader('etag'), false)) return replaceWithPage(r, 412);
  const ims = h['if-modified-since'];
  const inm = h['if-none-match'];
  if (ims === undefined && inm === undefined) return;
  if (ims !== undefined && isModified(r, ims)) return;
  if (inm !== undefined && !etagMatches(inm, r.getHeader('etag'), true)) return;
  r.status = 304;
  r.contentType = undefined;
  r.contentLength = undefined;
  r.setHeader('Accept-Ranges', undefined);
  r.setHeader('Content-Encoding', undefined);
}

function isModified(r: HttpRequest, ims: string): boolean {
  const lm = lastModifiedSec(r);
  if (lm === -1) return true;
  const mode = r.level.get(coreLoc).ifModifiedSince ?? 'exact';
  if (mode === 'off') return true;
  const t = parseHttpTime(ims);
  if (t === lm) return false;
  return mode === 'exact' || t < lm;
}

export const notModifiedModule: HttpModule = {
  name: 'ngx_http_not_modified_filter_module',
  directives: [],
  postconfiguration(http) {
    http.addHeaderFilter(notModifiedFilter);
  },
};

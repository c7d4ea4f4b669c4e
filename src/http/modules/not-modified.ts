/**
 * ngx_http_not_modified_filter_module: conditional requests on a 200
 * response — If-Unmodified-Since and If-Match (412), If-Modified-Since and
 * If-None-Match (304) — and `if_modified_since off|exact|before` (core).
 * Also the helper that lets a header filter replace the response with one of
 * nginx's pages.
 */
import { joinBodyFilter, toSink } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import type { HttpMainConf, HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { specialPage } from '../special-response.ts';
import { coreLoc } from '../core/settings.ts';
import { parseHttpTime } from '../../core/http-time.ts';

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
  r.ctx.set(REPLACED, page);
  joinBodyFilter(r, pageFilters.get(r.main)!);
}

/** The body filter of replaceWithPage, per loaded http block. */
const pageFilters = new WeakMap<HttpMainConf, BodyFilterEntry>();

/** The handler's body goes nowhere; at its end the page goes straight to the sink, past the other filters. */
function pageBodyFilter(r: HttpRequest, _chunk: Buffer, eof: boolean): boolean {
  if (eof) toSink(r, Buffer.from(r.ctx.get(REPLACED) as string, 'latin1'), true);
  return true;
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

function notModifiedFilter(r: HttpRequest): void {
  if (r.status !== 200 || r.disableNotModified) return;
  const ius = r.header('if-unmodified-since');
  if (ius !== undefined) {
    const lm = lastModifiedSec(r);
    if (lm === -1 || parseHttpTime(ius) < lm) return replaceWithPage(r, 412);
  }
  const im = r.header('if-match');
  if (im !== undefined && !etagMatches(im, r.getHeader('etag'), false)) return replaceWithPage(r, 412);
  const ims = r.header('if-modified-since');
  const inm = r.header('if-none-match');
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
    // nginx's not_modified filter position (see http-conf.ts)
    http.addHeaderFilter(200, notModifiedFilter);
    // before every body filter: nginx's ngx_http_filter_finalize_request sends the page instead of the body
    pageFilters.set(http, http.addBodyFilter(50, pageBodyFilter));
  },
};

/**
 * ngx_http_range_filter_module: `Range: bytes=…` on a 200 response whose
 * handler allows ranges (static files) — 206 with Content-Range for one
 * range, multipart/byteranges for several, 416 when none is satisfiable,
 * If-Range, and `max_ranges` (core). The handler then sends only the parts
 * (static.ts reads just those bytes from the file).
 */
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { coreLoc } from '../core/settings.ts';
import { replaceWithPage } from './not-modified.ts';
import { parseHttpTime } from '../../core/http-time.ts';

const ALLOW = {};
const PLAN = {};
const SINGLE = {};

export interface RangePart {
  start: number;
  /** Exclusive. */
  end: number;
  /** Multipart: the boundary and part headers written before the bytes. */
  head?: string;
}

export interface RangePlan {
  parts: RangePart[];
  /** Multipart: the closing boundary. */
  tail?: string;
}

/** The handler can send byte ranges of its body (nginx's r->allow_ranges). */
export function allowRanges(r: HttpRequest): void {
  r.ctx.set(ALLOW, true);
}

/** Only one range may be sent (nginx's r->single_range, the slice filter's responses). */
export function singleRange(r: HttpRequest): void {
  r.ctx.set(SINGLE, true);
}

/** The plan, taken from the handler: a filter (slice) cuts the body to it instead. */
export function takeRangePlan(r: HttpRequest): RangePlan | undefined {
  const plan = r.ctx.get(PLAN) as RangePlan | undefined;
  r.ctx.delete(PLAN);
  return plan;
}

/** The ranges to send, when the range filter turned the response into a 206. */
export function rangePlan(r: HttpRequest): RangePlan | undefined {
  return r.ctx.get(PLAN) as RangePlan | undefined;
}

const NOT_SATISFIABLE = -1;
const DECLINE = -2;

/** ngx_http_range_parse: the ranges, or NOT_SATISFIABLE / DECLINE. */
function parseRanges(spec: string, size: number, maxRanges: number): Array<[number, number]> | number {
  const out: Array<[number, number]> = [];
  let p = 6;
  let total = 0;
  let left = maxRanges;
  const isDigit = (i: number) => spec.charCodeAt(i) >= 48 && spec.charCodeAt(i) <= 57;
  const skipSpaces = () => { while (spec[p] === ' ') p++; };
  for (;;) {
    let start = 0;
    let end = 0;
    let suffix = false;
    let found = false;
    skipSpaces();
    if (spec[p] !== '-') {
      if (!isDigit(p)) return NOT_SATISFIABLE;
      while (isDigit(p)) {
        start = start * 10 + (spec.charCodeAt(p++) - 48);
        if (start > Number.MAX_SAFE_INTEGER / 10) return NOT_SATISFIABLE;
      }
      skipSpaces();
      if (spec[p++] !== '-') return NOT_SATISFIABLE;
      skipSpaces();
      if (spec[p] === ',' || p >= spec.length) {
        end = size;
        found = true;
      }
    } else {
      suffix = true;
      p++;
    }
    if (!found) {
      if (!isDigit(p)) return NOT_SATISFIABLE;
      while (isDigit(p)) {
        end = end * 10 + (spec.charCodeAt(p++) - 48);
        if (end > Number.MAX_SAFE_INTEGER / 10) return NOT_SATISFIABLE;
      }
      skipSpaces();
      if (spec[p] !== ',' && p < spec.length) return NOT_SATISFIABLE;
      if (suffix) {
        start = end < size ? size - end : 0;
        end = size - 1;
      }
      end = end >= size ? size : end + 1;
    }
    if (start < end) {
      out.push([start, end]);
      total += end - start;
      if (left-- === 0) return DECLINE;
    } else if (start === 0) {
      return DECLINE;
    }
    if (spec[p++] !== ',') break;
  }
  if (out.length === 0) return NOT_SATISFIABLE;
  if (total > size) return DECLINE;
  return out;
}

/** Boundaries are a counter, 20 digits wide, as nginx's ngx_next_temp_number gives them. */
let boundarySeq = 0;
function nextBoundary(): string {
  return String(boundarySeq++).padStart(20, '0');
}

function ifRangeAllows(r: HttpRequest, ifRange: string): boolean {
  if (ifRange.length >= 2 && ifRange.endsWith('"')) return ifRange === r.getHeader('etag');
  // a proxied response keeps its Last-Modified as a header (nginx's headers_out.last_modified_time)
  const lm = r.lastModified !== undefined ? Math.floor(r.lastModified / 1000) : parseLastModified(r.getHeader('last-modified'));
  if (lm === undefined) return false;
  return parseHttpTime(ifRange) === lm;
}

function parseLastModified(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const t = parseHttpTime(value);
  return t < 0 ? undefined : t;
}

function rangeHeaderFilter(r: HttpRequest): void {
  if (r.status !== 200 || r.contentLength === undefined || !r.ctx.has(ALLOW)) return;
  const maxRanges = r.ctx.has(SINGLE) ? 1 : r.level.get(coreLoc).maxRanges ?? Infinity;
  if (maxRanges === 0) return;
  const range = r.header('range');
  const ifRange = r.header('if-range');
  if (range === undefined || range.length < 7 || range.slice(0, 6).toLowerCase() !== 'bytes='
    || (ifRange !== undefined && !ifRangeAllows(r, ifRange))) {
    r.addHeader('Accept-Ranges', 'bytes');
    return;
  }
  const size = r.contentLength;
  const ranges = parseRanges(range, size, maxRanges);
  if (ranges === DECLINE) {
    r.addHeader('Accept-Ranges', 'bytes');
    return;
  }
  if (ranges === NOT_SATISFIABLE) {
    r.addHeader('Content-Range', `bytes */${size}`);
    replaceWithPage(r, 416, true);
    return;
  }
  const list = ranges as Array<[number, number]>;
  r.status = 206;
  if (list.length === 1) {
    const [start, end] = list[0];
    r.addHeader('Content-Range', `bytes ${start}-${end - 1}/${size}`);
    r.contentLength = end - start;
    r.ctx.set(PLAN, { parts: [{ start, end }] } satisfies RangePlan);
    return;
  }
  const boundary = nextBoundary();
  const type = r.contentType ? `Content-Type: ${r.contentType}\r\n` : '';
  const partHead = `\r\n--${boundary}\r\n${type}Content-Range: bytes `;
  const tail = `\r\n--${boundary}--\r\n`;
  let length = tail.length;
  const parts: RangePart[] = list.map(([start, end]) => {
    const head = `${partHead}${start}-${end - 1}/${size}\r\n\r\n`;
    length += head.length + end - start;
    return { start, end, head };
  });
  r.contentType = `multipart/byteranges; boundary=${boundary}`;
  r.contentLength = length;
  r.ctx.set(PLAN, { parts, tail } satisfies RangePlan);
}

export const rangeModule: HttpModule = {
  name: 'ngx_http_range_filter_module',
  directives: [],
  postconfiguration(http) {
    // nginx's range_header filter: after gzip (1500), which drops the length ranges need
    http.addHeaderFilter(1600, rangeHeaderFilter);
  },
};

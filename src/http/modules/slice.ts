/**
 * ngx_http_slice_filter_module: `slice SIZE` splits a response into
 * SIZE-aligned byte ranges fetched one after another, so a cache can keep
 * each slice as its own entry. The module is active only for requests that
 * evaluate `$slice_range` (`bytes=START-END` of the slice being fetched,
 * for `proxy_set_header Range` and the cache key), as in nginx.
 *
 * The client's request fetches the slice holding the start of the client's
 * range. Its answer must be a 206 whose Content-Range (complete length
 * known) covers exactly that slice; the response becomes a 200 with the
 * complete length, and the range filter then makes it the 206 the client
 * asked for (one range only). A 200 from the upstream passes untouched.
 * When the first body ends, a subrequest cloned from the request (same
 * method, location and content handler; nginx's NGX_HTTP_SUBREQUEST_CLONE)
 * fetches the next slice, and so on up to the end of the client's range;
 * each must answer 206 with the first answer's ETag and the expected range,
 * or the response is cut short (nginx's "etag mismatch in slice response").
 *
 * The range filter here has no body filter (handlers send only the planned
 * bytes), so this filter takes the plan from the handler and cuts every
 * slice's body to it itself. A subrequest's body flows into the client's
 * body chain after this filter, with backpressure.
 */
import { Writable } from 'node:stream';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import { setting } from '../../conf/setters.ts';
import { sizeArg } from '../../conf/values.ts';
import { EMPTY_CHUNK, joinBodyFilter, nextBodyFilter } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import { Phase } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import { logSubrequest } from '../phases.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { createSubrequest } from '../subrequest.ts';
import { allowRanges, singleRange, takeRangePlan } from './range.ts';

interface SliceConf {
  size?: number;
}

const sliceSlot = defineSlot<SliceConf, { size: number }>('slice', () => ({}), inheritUnset, { size: 0 });

/** What the client's request and its slice subrequests share (nginx's ngx_http_slice_ctx_t). */
interface SliceCtx {
  size: number;
  /** Start of the next slice to fetch. */
  start: number;
  /** Where fetching stops (exclusive), known once the first slice answered. */
  end: number;
  /** The complete length, from the first slice's Content-Range. */
  complete: number;
  range: string;
  etag: string | undefined;
  /** The slice being fetched answered (its head passed the checks). */
  active: boolean;
  /** The client's range, cut from every slice's body: [start, end). */
  cut: [number, number] | undefined;
  /** A subrequest's bytes the client's chain could not take yet: its write callback. */
  pending: (() => void) | undefined;
}

interface SliceFilters {
  cut: BodyFilterEntry;
  join: BodyFilterEntry;
}

/** r.ctx keys: the shared context, and one response's byte position in the whole file. */
const SLICE = {};
const POS = {};

function rangeOf(start: number, size: number): string {
  return `bytes=${start}-${start + size - 1}`;
}

/** ngx_http_slice_get_start: where the client's single range starts (0 when unknown). */
function clientStart(r: HttpRequest): number {
  if (r.header('if-range') !== undefined) return 0;
  const h = r.header('range');
  if (h === undefined || h.length < 7 || h.slice(0, 6).toLowerCase() !== 'bytes=') return 0;
  const spec = h.slice(6);
  if (spec.includes(',')) return 0;
  const m = /^ *(\d*)/.exec(spec)!;
  if (m[1] === '') return 0;
  const start = Number(m[1]);
  return Number.isSafeInteger(start) ? start : 0;
}

function sliceRangeVariable(r: HttpRequest): string | undefined {
  let ctx = r.ctx.get(SLICE) as SliceCtx | undefined;
  if (ctx) return ctx.range;
  if (r.parent || r.headerSent) return undefined;
  const size = r.level.get(sliceSlot).size;
  if (size === 0) return undefined;
  const start = size * Math.floor(clientStart(r) / size);
  ctx = { size, start, end: 0, complete: 0, range: rangeOf(start, size), etag: undefined, active: false, cut: undefined, pending: undefined };
  r.ctx.set(SLICE, ctx);
  return ctx.range;
}

/** ngx_http_slice_parse_content_range: `bytes START-END/LENGTH` (LENGTH -1 for `*`), END exclusive. */
function parseContentRange(value: string | undefined): { start: number; end: number; complete: number } | undefined {
  if (value === undefined) return undefined;
  const m = /^bytes +(\d+) *- *(\d+) *\/ *(\d+|\*) *$/.exec(value);
  if (!m) return undefined;
  const start = Number(m[1]);
  const end = Number(m[2]) + 1;
  const complete = m[3] === '*' ? -1 : Number(m[3]);
  if (!Number.isSafeInteger(end) || !Number.isSafeInteger(complete) || start >= end || (complete !== -1 && end > complete)) return undefined;
  return { start, end, complete };
}

/** The response is refused (nginx's NGX_ERROR from the header filter): logged here, once. */
function fail(r: HttpRequest, msg: string): never {
  requestLog(r).error(msg);
  throw Object.assign(new Error(msg), { logged: true });
}

/** Before not_modified (200): the slice's answer checked and turned into a 200 of the whole length. */
function sliceHeaderFilter(r: HttpRequest, body: SliceFilters): void {
  const ctx = r.ctx.get(SLICE) as SliceCtx | undefined;
  if (!ctx) return;
  if (r.status !== 206) {
    if (!r.parent) {
      r.ctx.delete(SLICE);
      return;
    }
    fail(r, `unexpected status code ${r.status} in slice response`);
  }
  const etag = r.getHeader('etag');
  if (ctx.etag !== undefined && etag !== ctx.etag) fail(r, 'etag mismatch in slice response');
  if (etag !== undefined) ctx.etag = etag;
  const cr = parseContentRange(r.getHeader('content-range'));
  if (!cr) fail(r, 'invalid range in slice response');
  if (cr.complete === -1) fail(r, 'no complete length in slice response');
  const end = Math.min(cr.start + ctx.size, cr.complete);
  if (cr.start !== ctx.start || cr.end !== end) fail(r, `unexpected range in slice response: ${cr.start}-${cr.end}`);
  ctx.start = end;
  ctx.active = true;
  if (!r.parent) ctx.complete = cr.complete;
  r.status = 200;
  r.statusReason = undefined;
  r.contentLength = cr.complete;
  r.setHeader('Content-Range', undefined);
  r.setHeader('Accept-Ranges', undefined);
  r.ctx.set(POS, { pos: cr.start });
  if (!r.parent) {
    allowRanges(r);
    singleRange(r);
  }
  if (r.method === 'HEAD') return;
  joinBodyFilter(r, body.cut);
  if (!r.parent) joinBodyFilter(r, body.join);
}

/** After the range filter (1600), for the client's request: how far to fetch, and the range to cut. */
function sliceRangeFilter(r: HttpRequest): void {
  const ctx = r.ctx.get(SLICE) as SliceCtx | undefined;
  if (!ctx?.active) return;
  const plan = takeRangePlan(r);
  if (r.status !== 206 || !plan) {
    // a 200 goes to the end; a page that replaced it (304, 412, 416) needs no more slices
    ctx.end = r.status === 200 ? ctx.complete : 0;
    return;
  }
  const { start, end } = plan.parts[0];
  ctx.cut = [start, end];
  // a range starting past the first slice (If-Range made it start at 0): skip to its slice
  if (ctx.start + ctx.size <= start) ctx.start = ctx.size * Math.floor(start / ctx.size);
  ctx.end = end;
}

/** The slice's bytes within the client's range. */
function cut(r: HttpRequest, ctx: SliceCtx, chunk: Buffer): Buffer {
  const st = r.ctx.get(POS) as { pos: number };
  const a = st.pos;
  st.pos += chunk.length;
  if (!ctx.cut || chunk.length === 0) return chunk;
  const from = Math.max(ctx.cut[0], a);
  const to = Math.min(ctx.cut[1], st.pos);
  return from < to ? chunk.subarray(from - a, to - a) : EMPTY_CHUNK;
}

/**
 * The top of the chain: every slice's body cut to the client's range; the
 * client's own body does not end here (nginx clears its last_buf) but
 * starts the next slice.
 */
function sliceBodyFilter(r: HttpRequest, body: SliceFilters, chunk: Buffer, eof: boolean): boolean {
  const ctx = r.ctx.get(SLICE) as SliceCtx;
  const out = cut(r, ctx, chunk);
  if (r.parent) return nextBodyFilter(r, body.cut, out, eof);
  const ok = out.length === 0 || nextBodyFilter(r, body.cut, out, false);
  if (eof) nextSlice(r, body, ctx);
  return ok;
}

/** The client's chain can take more: a waiting subrequest goes on. */
function sliceResume(r: HttpRequest): boolean {
  const ctx = r.ctx.get(SLICE) as SliceCtx | undefined;
  const fn = ctx?.pending;
  if (fn) {
    ctx.pending = undefined;
    fn();
  }
  return true;
}

/** A slice's body ended: fetch the next one, or end the client's body (through the whole chain). */
function nextSlice(r: HttpRequest, body: SliceFilters, ctx: SliceCtx): void {
  if (!ctx.active) {
    requestLog(r).error('missing slice response');
    r.sink.abort();
    return;
  }
  if (ctx.start >= ctx.end) {
    nextBodyFilter(r, body.cut, EMPTY_CHUNK, true);
    return;
  }
  ctx.active = false;
  ctx.range = rangeOf(ctx.start, ctx.size);
  const sink = new Writable({
    highWaterMark: 0,
    write(chunk: Buffer, _enc, done) {
      // a subrequest's body went through its own filters: it joins the client's at the postpone filter
      if (nextBodyFilter(r, body.join, chunk, false)) done();
      else ctx.pending = () => done();
    },
  });
  const sub = createSubrequest(r, r.uri, r.args, { sink, onBodyEnd: logSubrequest });
  if (!sub) {
    r.sink.abort();
    return;
  }
  const sr = sub.r;
  sr.method = r.method;
  sr.setLocation(r.loc);
  sr.level = r.level;
  sr.contentHandler = r.contentHandler;
  sr.ctx.set(SLICE, ctx);
  void sub.done.then((whole) => {
    if (!whole) r.sink.abort();
    else nextSlice(r, body, ctx);
  });
  sub.start(Phase.CONTENT);
}

export const sliceModule: HttpModule = {
  name: 'ngx_http_slice_filter_module',
  directives: [
    { name: 'slice', contexts: HTTP_ANY, args: 1, handler: setting(sliceSlot, 'size', sizeArg) },
  ],
  variables: [
    { name: 'slice_range', get: sliceRangeVariable, noCache: true },
  ],
  postconfiguration(http) {
    // nginx's slice and range body filters come first in the body chain; the slices' bodies are put
    // in the client's at the postpone filter (1400), after the filters each went through
    const body: SliceFilters = {
      cut: http.addBodyFilter(150, (r, chunk, eof) => sliceBodyFilter(r, body, chunk, eof)),
      join: http.addBodyFilter(1400, (r, chunk, eof) => nextBodyFilter(r, body.join, chunk, eof), sliceResume),
    };
    // before not_modified (200), so it sees the 200; for slice subrequests too
    http.addHeaderFilter(150, (r) => sliceHeaderFilter(r, body), { subrequests: true });
    http.addHeaderFilter(1650, sliceRangeFilter);
  },
};

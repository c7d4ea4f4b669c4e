/**
 * The response body filter chain (nginx's ngx_http_top_body_filter): one
 * list of functions, sorted by their declared order, each called with
 * `(r, chunk, eof)` and passing what it makes to the next with
 * nextBodyFilter(). A filter can hold, replace, split or drop chunks and
 * sees the end of the body (eof, possibly with an empty chunk). The last
 * link writes into the request's sink, `r.out`.
 *
 * A filter takes part in a request only when its header filter joined it
 * (joinBodyFilter, nginx's ctx check): a request without one writes straight
 * into its sink.
 *
 * Backpressure is nginx's "busy" chain: a call returns false when the
 * writer should wait; the writer then waits with waitBodyDrain(). Whoever
 * said "wait" resumes the chain later with resumeBody(): the sink when it
 * drains, or a filter that held bytes of its own (gzip's deflate, SSI while
 * a subrequest runs). Resuming asks each active filter before that point,
 * nearest first, whether it can take more (its `resume` hook, which also
 * sends what it held), then calls the writer's drain handler.
 */
import type { HttpRequest } from './request.ts';

/** Takes a chunk (maybe empty when `eof`); false when the writer should wait for waitBodyDrain(). */
export type BodyFilter = (r: HttpRequest, chunk: Buffer, eof: boolean) => boolean;

/**
 * The filters after this one can take more: send what was held. False keeps
 * the writers before this filter waiting (it calls resumeBody itself later).
 */
export type BodyResume = (r: HttpRequest) => boolean;

/** A filter as installed in the chain (HttpMainConf.addBodyFilter). */
export interface BodyFilterEntry {
  readonly order: number;
  readonly filter: BodyFilter;
  readonly resume: BodyResume | undefined;
  /** Position in the chain; a filter installed later with a lower order moves it. */
  index: number;
}

/** A request's active filters are bits of one number. */
export const MAX_BODY_FILTERS = 31;

export const EMPTY_CHUNK = Buffer.alloc(0);

/** This request's body goes through `entry` (called from a header filter, before the body starts). */
export function joinBodyFilter(r: HttpRequest, entry: BodyFilterEntry): void {
  r.bodyFilters |= 1 << entry.index;
}

/**
 * Passes a chunk to the first active filter after `after` (the start of the
 * chain when undefined), or to the sink.
 */
export function nextBodyFilter(r: HttpRequest, after: BodyFilterEntry | undefined, chunk: Buffer, eof: boolean): boolean {
  const rest = after === undefined ? r.bodyFilters : r.bodyFilters & (-2 << after.index);
  if (rest === 0) return toSink(r, chunk, eof);
  return r.main.bodyFilters[31 - Math.clz32(rest & -rest)].filter(r, chunk, eof);
}

/** The end of the chain: the request's sink (for a filter whose bytes skip the rest, as nginx's special pages). */
export function toSink(r: HttpRequest, chunk: Buffer, eof: boolean): boolean {
  const out = r.out;
  if (eof) {
    out.end(chunk.length ? chunk : undefined);
    return true;
  }
  if (out.write(chunk)) return true;
  if (!r.sinkWaiting) {
    r.sinkWaiting = true;
    out.onceDrain((r.sinkDrained ??= () => {
      r.sinkWaiting = false;
      resumeBody(r, undefined);
    }));
  }
  return false;
}

/** The writer waits: `fn` runs once the chain can take more (it replaces any earlier one). */
export function waitBodyDrain(r: HttpRequest, fn: () => void): void {
  r.drainHandler = fn;
}

/** The writer stops waiting (it finished or gave up). */
export function cancelBodyDrain(r: HttpRequest, fn: () => void): void {
  if (r.drainHandler === fn) r.drainHandler = undefined;
}

/**
 * Whatever is after `from` (the sink when undefined) can take more: the
 * filters before it send what they held, nearest first, then the writer
 * goes on.
 */
export function resumeBody(r: HttpRequest, from: BodyFilterEntry | undefined): void {
  let mask = from === undefined ? r.bodyFilters : r.bodyFilters & ((1 << from.index) - 1);
  const chain = r.main.bodyFilters;
  while (mask !== 0) {
    const i = 31 - Math.clz32(mask);
    mask &= ~(1 << i);
    const resume = chain[i].resume;
    if (resume !== undefined && !resume(r)) return;
  }
  const fn = r.drainHandler;
  if (fn !== undefined) {
    r.drainHandler = undefined;
    fn();
  }
}

/**
 * header_filter_by_lua and body_filter_by_lua: run synchronously for each
 * response head and body chunk (OpenResty forbids waiting there: ngx.sleep
 * and the body reader refuse). `ngx.arg[1]` is the chunk, `ngx.arg[2]` the
 * end flag; setting the flag ends the body there (later chunks are dropped).
 */
import { joinBodyFilter, nextBodyFilter } from '../../body-filter.ts';
import type { BodyFilterEntry } from '../../body-filter.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { luaLoc } from './conf.ts';
import { failed, runtimeOf } from './hooks.ts';
import type { HookContext } from './runtime.ts';


export function luaHeaderFilter(r: HttpRequest, body: BodyFilterEntry): void {
  const conf = r.level.get(luaLoc);
  if (conf.headerFilter) {
    const runtime = runtimeOf(r);
    const ctx: HookContext = { runtime, r, phase: 'header_filter' };
    const outcome = runtime.run(conf.headerFilter, ctx);
    if (outcome instanceof Promise) {
      requestLog(r).error('failed to run header_filter_by_lua*: attempt to yield across C-call boundary');
    } else if (!outcome.ok && ctx.exit === undefined) {
      failed(r, 'header_filter', outcome);
      r.sink.abort();
      return;
    }
  }
  if (conf.bodyFilter && r.method !== 'HEAD') joinBodyFilter(r, body);
}

/** Per request: the Lua filter ended the body early (ngx.arg[2] = true). */
const ENDED = {};

export function luaBodyFilter(r: HttpRequest, chunk: Buffer, eof: boolean, self: BodyFilterEntry): boolean {
  if (r.ctx.get(ENDED)) return true;
  const hook = r.level.get(luaLoc).bodyFilter;
  if (!hook) return nextBodyFilter(r, self, chunk, eof);
  const runtime = runtimeOf(r);
  const ctx: HookContext = { runtime, r, phase: 'body_filter', args: [chunk, eof] };
  const outcome = runtime.run(hook, ctx);
  if (outcome instanceof Promise) {
    requestLog(r).error('failed to run body_filter_by_lua*: attempt to yield across C-call boundary');
  } else if (!outcome.ok && ctx.exit === undefined) {
    failed(r, 'body_filter', outcome);
    r.sink.abort();
    return true;
  }
  const data = ctx.args![0];
  const out = typeof data === 'string' ? Buffer.from(data, 'latin1') : data as Buffer;
  const last = ctx.args![1] === true;
  if (last && !eof) r.ctx.set(ENDED, true);
  // the filter took the end away (ngx.arg[2] = false): a subrequest's body then ends
  // without its last buffer, which ngx.location.capture reports as truncated
  if (eof && !last && r.parent) r.ctx.set(CUT, true);
  return nextBodyFilter(r, self, out, eof || last);
}

/** Per subrequest: a Lua body filter removed the end of the body. */
const CUT = {};

/** Whether a Lua body filter removed the end of subrequest `sr`'s body (its capture is `truncated`). */
export function bodyCut(sr: HttpRequest): boolean {
  return sr.ctx.has(CUT);
}

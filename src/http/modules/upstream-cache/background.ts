/**
 * proxy_cache_background_update (ngx_http_upstream_cache_background_update):
 * the client gets the expired response at once (STALE) and a background
 * subrequest for the same URI fetches the new one into the cache. The
 * subrequest's head and body go nowhere; it is not tied to the client's
 * response (nginx's NGX_HTTP_SUBREQUEST_BACKGROUND), so it goes on after
 * the client's response is complete.
 */
import { Writable } from 'node:stream';
import type { HttpRequest } from '../../request.ts';
import { Subrequest } from '../../subrequest.ts';

const BACKGROUND = {};

/** Whether `r` is a background update: it goes upstream and stores, whatever the cache holds. */
export function isBackgroundUpdate(r: HttpRequest): boolean {
  return r.ctx.has(BACKGROUND);
}

/** Starts the background update of the key `r` found expired. */
export function startBackgroundUpdate(r: HttpRequest): Promise<boolean> {
  const sink = new Writable({ write(_chunk, _enc, cb) { cb(); } });
  const sub = new Subrequest(r, r.uri, r.args, { sink });
  // the same method as the request it updates for (nginx clones the request)
  sub.r.method = r.method === 'HEAD' ? 'GET' : r.method;
  sub.r.ctx.set(BACKGROUND, true);
  // started once the client's stale response is on its way, as nginx posts it
  setImmediate(() => sub.start());
  return sub.done;
}

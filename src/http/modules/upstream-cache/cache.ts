/**
 * The upstream engine's cache (nginx's ngx_http_upstream_cache_*): the hooks
 * of proxy_cache, fastcgi_cache, uwsgi_cache and scgi_cache into the cache
 * (src/http/cache/), made by upstreamCache for a module's cache slot and
 * what its protocol does differently (CacheProtocol).
 *
 * - cacheLookup (UpstreamRequest.start): before connecting, the key is
 *   evaluated and looked up; a fresh file is served from disk (HIT), a
 *   stale one while another request updates it (UPDATING, with
 *   `proxy_cache_use_stale updating`); otherwise the request goes upstream
 *   (MISS, EXPIRED, BYPASS).
 * - cacheWriter (ResponseReader.accept): decides whether the upstream's
 *   response may be stored and returns the writer the relay feeds with the
 *   decoded body; the file is renamed into place when the body is complete.
 * - cacheServeStale (UpstreamRequest.finalize): an upstream failure listed
 *   in `proxy_cache_use_stale` is answered from the stale file (STALE).
 * `$upstream_cache_status` reports which of these happened.
 */
import fs from 'node:fs';
import type { MergedConf } from '../../../conf/context.ts';
import type { UpstreamDerived, UpstreamLoc } from '../../upstream/conf.ts';
import type { UpstreamCache } from '../../upstream/protocol.ts';
import { createTempFile } from '../../request-body.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { endBody, sendBody, sendHeader } from '../../response.ts';
import { bodyReplaced } from '../not-modified.ts';
import { allowRanges, rangePlan } from '../range.ts';
import { commitFile, fileHeader, readCacheFile, rewriteMeta } from '../../cache/file.ts';
import type { CacheFile, CacheMeta } from '../../cache/file.ts';
import { fresh, validUntil } from '../../cache/validity.ts';
import { filePath, lookup, md5, revalidate, setUpdating, stored } from '../../cache/zone.ts';
import type { CacheZone } from '../../cache/zone.ts';
import { variantDigest, variantOf } from '../../cache/vary.ts';
import { IGN } from '../../upstream/conf.ts';
import { isBackgroundUpdate, startBackgroundUpdate } from './background.ts';
import { zoneNamed } from './directives.ts';
import type { CacheLocConf, CacheSlot } from './directives.ts';
import { parseResponseHead } from '../../upstream/response-head.ts';
import type { UpstreamHead } from '../../upstream/protocol.ts';

import type { AnyUpstream, CacheProtocol } from './protocol.ts';

const CACHE_CTX = {};

/** How long a request fetching an expired key makes others serve it stale (nginx: until the response is in). */
const UPDATING_MS = 60_000;

/** How often a request waiting on proxy_cache_lock looks again (nginx wakes waiters every 500 ms or on completion). */
const LOCK_POLL_MS = 25;
const LOCK_CTX = {};

interface CacheState {
  z: CacheZone;
  c: MergedConf<CacheSlot>;
  p: CacheProtocol;
  key: string;
  digest: Buffer;
  status: 'MISS' | 'HIT' | 'EXPIRED' | 'BYPASS' | 'STALE' | 'UPDATING' | 'REVALIDATED';
  uses: number;
  /** The stored (stale) response, kept for proxy_cache_use_stale. */
  stale: CacheFile | undefined;
  /** This request marked the key as updating. */
  updating: boolean;
  /** A conditional request went upstream for the stored response (proxy_cache_revalidate). */
  revalidating?: boolean;
  /** proxy_cache_lock timed out: the response goes to the client only. */
  noStore?: boolean;
}

/** A predicate list (proxy_cache_bypass, proxy_no_cache): any value that is not empty or "0". */
function anyTrue(list: CacheLocConf['bypass'], r: HttpRequest): boolean {
  if (!list) return false;
  for (const v of list) {
    const s = v.evaluate(r);
    if (s !== '' && s !== '0') return true;
  }
  return false;
}

export function cacheStatus(r: HttpRequest): string | undefined {
  return (r.ctx.get(CACHE_CTX) as CacheState | undefined)?.status;
}

/** The engine's cache hooks for a module's cache slot and protocol. */
export function upstreamCache<C extends UpstreamLoc, D extends UpstreamDerived>(slot: CacheSlot, p: CacheProtocol): UpstreamCache<C, D> {
  return {
    lookup: (u) => cacheLookup(u as unknown as AnyUpstream, slot, p),
    serveStale: (u, rc) => cacheServeStale(u as unknown as AnyUpstream, rc),
    staleStatus: (u, status, head) => cacheStaleStatus(u as unknown as AnyUpstream, status, head),
    error: (u, head) => cacheError(u as unknown as AnyUpstream, head),
    writer: (u, head, raw) => cacheWriter(u as unknown as AnyUpstream, head, raw),
  };
}

/** Hook: before connecting upstream. True when the response was served from the cache. */
function cacheLookup(u: AnyUpstream, slot: CacheSlot, p: CacheProtocol): boolean {
  const r = u.r;
  const c = r.level.get(slot);
  if (!c.zone) return false;
  p.prepare?.(u, c);
  let z: CacheZone | undefined;
  if ('evaluate' in c.zone) {
    const name = c.zone.evaluate(r);
    // an empty name: no caching for this request
    if (name === '') return false;
    z = zoneNamed(name);
    if (!z) {
      // nginx: the request fails (ngx_http_upstream_cache_get)
      requestLog(r).error(`cache "${name}" not found`);
      u.finalize(500);
      return true;
    }
  } else z = c.zone.data;
  if (!z || !c.methods.has(r.method)) return false;
  const key = c.key ? c.key.evaluate(r) : p.defaultKey ? p.defaultKey(u, c) : undefined;
  if (key === undefined) return false;
  const digest = md5(key);
  const st: CacheState = { z, c, p, key, digest, status: 'MISS', uses: 0, stale: undefined, updating: false };
  r.ctx.set(CACHE_CTX, st);
  if (anyTrue(c.bypass, r)) {
    st.status = 'BYPASS';
    return false;
  }
  let e = lookup(z, digest);
  let f = e.validUntil === 0 ? undefined : readCacheFile(filePath(z, digest));
  if (f?.meta.vary !== undefined && f.meta.variant !== variantOf(f.meta.vary, r)) {
    // another variant of a response with Vary: looked up under its own name
    st.digest = variantDigest(key, variantOf(f.meta.vary, r));
    e = lookup(z, st.digest);
    f = e.validUntil === 0 ? undefined : readCacheFile(filePath(z, st.digest));
  }
  st.uses = e.uses;
  if (f && fresh(f.meta.validUntil, Date.now())) {
    st.status = 'HIT';
    // an intercepted error that was cached: answered as the error again (error_page applies)
    if (f.meta.error) u.finalize(f.meta.error);
    else serve(u, f);
    return true;
  }
  const bg = isBackgroundUpdate(r);
  if (f) {
    st.status = 'EXPIRED';
    if (!f.meta.error) st.stale = f;
    // stale-while-revalidate=N of the stored response counts as `use_stale updating` for N seconds after expiry
    const swr = f.meta.staleWhileRevalidate;
    const updatingOk = c.useStale.has('updating') || (swr !== undefined && Date.now() < f.meta.validUntil + 1000 + swr * 1000);
    if (!bg && st.stale && updatingOk && (e.updating || c.backgroundUpdate)) {
      st.status = e.updating ? 'UPDATING' : 'STALE';
      // proxy_cache_background_update: the client gets the stale response, a subrequest fetches the new one
      serve(u, f, e.updating ? undefined : startBackgroundUpdate(r));
      return true;
    }
  }
  if (c.lock && e.updating) {
    // proxy_cache_lock: another request is fetching this key; look again shortly, until proxy_cache_lock_timeout
    let until = r.ctx.get(LOCK_CTX) as number | undefined;
    if (until === undefined) r.ctx.set(LOCK_CTX, (until = Date.now() + c.lockTimeoutMs));
    if (Date.now() < until) {
      setTimeout(() => { if (!u.settled) u.start(); }, LOCK_POLL_MS);
      return true;
    }
    // the lock timed out: this request goes upstream and its response is not stored (nginx 1.7.8+)
    st.noStore = true;
    return false;
  }
  // the lock (or use_stale updating) lasts until the response is stored, at most proxy_cache_lock_age
  setUpdating(z, st.digest, c.lock ? c.lockAgeMs : UPDATING_MS);
  st.updating = true;
  if (!f) return false;
  if (c.revalidate && (f.meta.lastModified !== undefined || f.meta.etag !== undefined)) {
    // *_cache_revalidate: a conditional request; a 304 renews the stored response (cacheStaleStatus)
    if (p.revalidate?.(u, f.meta.lastModified, f.meta.etag)) st.revalidating = true;
  }
  return false;
}

/** Hook: the exchange failed with `rc` before a head went out. True when a stale response was sent instead. */
function cacheServeStale(u: AnyUpstream, rc: number, fromExchange = true): boolean {
  const st = u.r.ctx.get(CACHE_CTX) as CacheState | undefined;
  if (st) doneUpdating(st);
  if (!st || !st.stale) return false;
  const when = st.c.useStale;
  // Cache-Control: stale-if-error=N of the stored response allows it on a failed exchange (not on an upstream's 5xx status) for N seconds after expiry
  const sie = st.stale.meta.staleIfError;
  const ok = (rc === 502 && (when.has('error') || when.has('invalid_header'))) || (rc === 504 && when.has('timeout'))
    || when.has(`http_${rc}`) || (fromExchange && sie !== undefined && (rc === 502 || rc === 504) && Date.now() < st.stale.meta.validUntil + 1000 + sie * 1000);
  if (!ok) return false;
  doneUpdating(st);
  st.status = 'STALE';
  serve(u, st.stale);
  return true;
}

/**
 * Hook: the upstream answered with `status`. A 304 to a revalidation renews
 * the stored response and serves it (REVALIDATED); a status listed in
 * use_stale (http_500, http_404, ...) is answered from the stale file.
 */
function cacheStaleStatus(u: AnyUpstream, status: number, head?: UpstreamHead): boolean {
  if (status !== 304 && status < 400) return false;
  const st = u.r.ctx.get(CACHE_CTX) as CacheState | undefined;
  if (status === 304) {
    if (!st || !st.revalidating || !st.stale) return false;
    renew(st, head);
    st.status = 'REVALIDATED';
    doneUpdating(st);
    serve(u, st.stale);
    return true;
  }
  if (!st || !st.stale || !st.c.useStale.has(`http_${status}`)) return false;
  return cacheServeStale(u, status, false);
}

/**
 * A revalidated response is valid for what the 304 says, else for what the
 * stored response's own headers say from now (nginx sends the cached head
 * again and reads its Cache-Control/Expires), else for the stored status's
 * *_cache_valid time.
 */
function renew(st: CacheState, head: UpstreamHead | undefined): void {
  const f = st.stale!;
  const stored = parseResponseHead(f.head, () => undefined) as UpstreamHead;
  const now = Date.now();
  let until = head ? validUntil(head.headers, stored.status, undefined, 0, now) : 0;
  if (until === 0) until = validUntil(stored.headers, stored.status, st.c.valid, 0, now);
  if (until === 0) return;
  f.meta.validUntil = until;
  const file = filePath(st.z, st.digest);
  const tmp = createTempFile(st.z.tempPath);
  fs.closeSync(tmp.fd);
  if (rewriteMeta(file, f, st.key, tmp.path)) revalidate(st.z, st.digest, until);
}

function doneUpdating(st: CacheState): void {
  if (!st.updating) return;
  st.updating = false;
  setUpdating(st.z, st.digest, 0);
}

/** Sends a stored response: its head through the module's usual header rules, then the body. */
/**
 * `until`: a background update; the whole body is sent at once, but the
 * response ends when the update is over (nginx keeps the request, and so a
 * closing connection, until its background subrequest is done).
 */
function serve(u: AnyUpstream, f: CacheFile, until?: Promise<unknown>): void {
  const r = u.r;
  const head = parseResponseHead(f.head, () => undefined) as UpstreamHead;
  u.headerSent();
  u.protocol.copyHeaders(u, head);
  // the length only as the upstream sent it (copyHeaders): nginx stores a chunked answer as it came
  // and sends it from the cache chunked again, without a Content-Length
  const noBody = r.method === 'HEAD' || head.status === 204 || head.status === 304;
  // a cached response that came with Accept-Ranges can be sent in byte ranges (ngx_http_upstream_copy_allow_ranges when r->cached)
  if (head.headers.lnames.includes('accept-ranges')) allowRanges(r);
  // on a later turn: callers (stale answers to a 304 or an error status) finish the upstream side first
  void new Promise<void>((done) => done(sendHeader(r))).then(() => {
    const plan = rangePlan(r);
    if (noBody || bodyReplaced(r)) endBody(r);
    else if (!plan && until) {
      sendBody(r, f.body);
      void until.then(() => endBody(r));
    } else if (!plan) endBody(r, f.body);
    else {
      for (const part of plan.parts) {
        if (part.head) sendBody(r, Buffer.from(part.head, 'latin1'));
        sendBody(r, f.body.subarray(part.start, part.end));
      }
      endBody(r, plan.tail === undefined ? undefined : Buffer.from(plan.tail, 'latin1'));
    }
    u.relayDone();
  }, (err: Error) => {
    requestLog(r).error(`sending a cached response failed: ${err.message}`);
    r.sink.abort();
    u.relayDone();
  });
}

/** Receives the decoded body while it is relayed, and stores it when complete. */
export class CacheWriter {
  private readonly st: CacheState;
  private readonly validUntil: number;
  private fd: number;
  private readonly tmp: string;
  private size = 0;
  private done = false;

  constructor(st: CacheState, validUntil: number, fd: number, tmp: string) {
    this.st = st;
    this.validUntil = validUntil;
    this.fd = fd;
    this.tmp = tmp;
  }

  push(b: Buffer): void {
    if (this.done) return;
    try {
      fs.writeSync(this.fd, b);
      this.size += b.length;
    } catch {
      this.abort();
    }
  }

  end(): void {
    if (this.done) return;
    this.done = true;
    fs.closeSync(this.fd);
    const st = this.st;
    if (commitFile(this.tmp, filePath(st.z, st.digest))) stored(st.z, st.digest, this.validUntil, this.size);
    doneUpdating(st);
  }

  abort(): void {
    if (this.done) return;
    this.done = true;
    try { fs.closeSync(this.fd); } catch { /* closed */ }
    fs.rm(this.tmp, { force: true }, () => undefined);
    doneUpdating(this.st);
  }
}

/**
 * Statuses nginx never stores: the non-final ones and 304. A 206 is stored when its validity
 * allows (`proxy_cache_valid 206`): the client's Range is not sent upstream with a cache, so a
 * 206 answers a Range the configuration set (the slice module's `$slice_range`).
 */
function storable(status: number): boolean {
  return status >= 200 && status !== 304;
}

/**
 * Hook: the upstream's head was accepted (`raw` is the head as received).
 * Returns the writer for the body, or undefined when the response is not
 * to be stored.
 */
function cacheWriter(u: AnyUpstream, head: UpstreamHead, raw: string): CacheWriter | undefined {
  const r = u.r;
  const st = r.ctx.get(CACHE_CTX) as CacheState | undefined;
  if (!st) return undefined;
  const c = st.c;
  const until = validUntil(head.headers, head.status, c.valid, u.conf.ignoreHeaders, Date.now());
  // a HEAD client's body is read for the cache only (relay.teeOnly); a HEAD sent upstream as HEAD
  // (proxy_cache_convert_head off) is stored with its empty body, as nginx does
  if (st.noStore || !storable(head.status) || until === 0 || anyTrue(c.noCache, r) || (st.status !== 'BYPASS' && st.uses < c.minUses)) {
    // the stored response stays (nginx keeps it: a later request may still revalidate it or use it stale)
    doneUpdating(st);
    return undefined;
  }
  // validators for proxy_cache_revalidate: 200 responses only (nginx's header filters drop them for other statuses)
  const lm = head.status === 200 ? head.headers.lnames.indexOf('last-modified') : -1;
  const et = head.status === 200 ? head.headers.lnames.indexOf('etag') : -1;
  const vi = u.conf.ignoreHeaders & IGN.Vary ? -1 : head.headers.lnames.indexOf('vary');
  const vary = vi >= 0 ? head.headers.values[vi] : undefined;
  const text = st.p.storedHead ? st.p.storedHead(head, raw) : raw;
  return openWriter(r, st, {
    validUntil: until, headLen: text.length, vary,
    staleIfError: ccExtension(head.headers, u.conf.ignoreHeaders, 'stale-if-error'),
    staleWhileRevalidate: ccExtension(head.headers, u.conf.ignoreHeaders, 'stale-while-revalidate'), variant: vary === undefined ? undefined : variantOf(vary, r),
    lastModified: lm >= 0 ? head.headers.values[lm] : undefined, etag: et >= 0 ? head.headers.values[et] : undefined,
  }, text);
}

function openWriter(r: HttpRequest, st: CacheState, meta: CacheMeta, raw: string): CacheWriter | undefined {
  try {
    const t = createTempFile(st.z.tempPath);
    fs.writeSync(t.fd, fileHeader(meta, st.key, raw));
    return new CacheWriter(st, meta.validUntil, t.fd, t.path);
  } catch (err) {
    requestLog(r).crit(`cache file write failed (${(err as Error).message})`);
    doneUpdating(st);
    return undefined;
  }
}

/** Hook: an upstream error intercepted by error_page; nginx stores the status alone when it is cacheable. */
function cacheError(u: AnyUpstream, head: UpstreamHead): void {
  const st = u.r.ctx.get(CACHE_CTX) as CacheState | undefined;
  if (!st) return;
  const c = st.c;
  const until = validUntil(head.headers, head.status, c.valid, u.conf.ignoreHeaders, Date.now());
  if (st.noStore || until === 0 || anyTrue(c.noCache, u.r) || (st.status !== 'BYPASS' && st.uses < c.minUses)) {
    doneUpdating(st);
    return;
  }
  const w = openWriter(u.r, st, { validUntil: until, headLen: 0, error: head.status }, '');
  w?.end();
}

/** `Cache-Control: stale-if-error=N` (nginx's error_sec) or `stale-while-revalidate=N` (updating_sec), unless Cache-Control is ignored. */
function ccExtension(h: UpstreamHead['headers'], ignore: number, name: string): number | undefined {
  if (ignore & IGN['Cache-Control']) return undefined;
  const re = new RegExp(`(?:^|[\\s,])${name}=(\\d+)`, 'i');
  for (let i = 0; i < h.lnames.length; i++) {
    const m = h.lnames[i] === 'cache-control' ? re.exec(h.values[i]) : null;
    if (m) return Number(m[1]);
  }
  return undefined;
}

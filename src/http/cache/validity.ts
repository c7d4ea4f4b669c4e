/**
 * How long an upstream response may be cached, as nginx decides it
 * (ngx_http_upstream_process_accel_expires / _cache_control / _expires /
 * _set_cookie / _vary, then ngx_http_file_cache_valid): `X-Accel-Expires`
 * wins, then `Cache-Control` (no-cache, no-store, private: not cached;
 * s-maxage or max-age), then `Expires`; a response they say nothing about
 * is cached for the `proxy_cache_valid` time of its status. `Set-Cookie`
 * and `Vary: *` make it uncacheable. `proxy_ignore_headers` switches each
 * field off.
 */
import type { HeaderList } from '../upstream/module.ts';

/** proxy_ignore_headers bits used here (the same values as the proxy's IGN). */
const IGN_X_ACCEL_EXPIRES = 0x4;
const IGN_EXPIRES = 0x40;
const IGN_CACHE_CONTROL = 0x80;
const IGN_SET_COOKIE = 0x100;
const IGN_VARY = 0x200;

/** One `proxy_cache_valid` line: its statuses (0: any) and time in ms. */
export interface ValidRule {
  status: number;
  ms: number;
}

/** The rule for `status`: its own first, else `any` (nginx's order of lookup). */
export function validFor(rules: ValidRule[] | undefined, status: number): number {
  if (!rules) return 0;
  for (const v of rules) if (v.status === status) return v.ms;
  for (const v of rules) if (v.status === 0) return v.ms;
  return 0;
}

/** Whether a response valid until `until` (from validUntil) is still fresh: nginx counts whole seconds (valid_sec >= ngx_time()). */
export function fresh(until: number, now: number): boolean {
  return until >= Math.floor(now / 1000) * 1000;
}

/**
 * Epoch ms (whole seconds, as nginx's valid_sec) until which the response
 * is fresh; 0 when it must not be cached. `h` is the upstream response's
 * header fields as received (an upstream HeaderList: lowercased names, values).
 */
export function validUntil(h: { readonly lnames: readonly string[]; readonly values: readonly string[] }, status: number, rules: ValidRule[] | undefined, ignore: number, nowMs: number): number {
  const now = Math.floor(nowMs / 1000) * 1000;
  const get = (n: string) => {
    const i = h.lnames.indexOf(n);
    return i < 0 ? undefined : h.values[i];
  };
  if (!(ignore & IGN_SET_COOKIE) && get('set-cookie') !== undefined) return 0;
  if (!(ignore & IGN_VARY)) {
    const vary = get('vary');
    if (vary !== undefined && vary.trim() === '*') return 0;
  }
  const xae = ignore & IGN_X_ACCEL_EXPIRES ? undefined : get('x-accel-expires');
  if (xae !== undefined) {
    const v = xae.trim();
    if (v.startsWith('@')) {
      const n = Number.parseInt(v.slice(1), 10);
      // an absolute time is stored even when it is past (served as EXPIRED), as nginx sets valid_sec to it
      if (Number.isFinite(n)) return n > 0 ? n * 1000 : 0;
    } else {
      const n = Number.parseInt(v, 10);
      if (Number.isFinite(n)) return n > 0 ? now + n * 1000 : 0;
    }
  }
  if (!(ignore & IGN_CACHE_CONTROL)) {
    let maxAge = -1;
    let found = false;
    for (let i = 0; i < h.lnames.length; i++) {
      if (h.lnames[i] !== 'cache-control') continue;
      const cc = h.values[i].toLowerCase();
      if (/(^|[\s,])(no-cache|no-store|private)([\s,=]|$)/.test(cc)) return 0;
      const m = /(?:^|[\s,])s-maxage=(\d+)/.exec(cc) ?? /(?:^|[\s,])max-age=(\d+)/.exec(cc);
      if (m) { maxAge = Number(m[1]); found = true; }
    }
    if (found) return maxAge > 0 ? now + maxAge * 1000 : 0;
  }
  if (!(ignore & IGN_EXPIRES)) {
    const exp = get('expires');
    if (exp !== undefined) {
      const t = Date.parse(exp);
      // an invalid date is a date in the past: not cached
      return Number.isNaN(t) || t < now ? 0 : t;
    }
  }
  const ms = validFor(rules, status);
  return ms > 0 ? now + Math.floor(ms / 1000) * 1000 : 0;
}

/**
 * The cache directives of every module on the upstream engine, under the
 * module's prefix (`proxy_cache`, `fastcgi_cache_key`, `scgi_cache_valid`,
 * …): nginx repeats them in each module's command table with
 * ngx_http_file_cache_set_slot / _valid_set_slot; here one factory makes the
 * rows for a prefix and the module's cache slot (cacheSlot). The hooks that
 * use them are in cache.ts.
 */
import { defineSlot, inheritUnset } from '../../../conf/context.ts';
import type { ConfContext } from '../../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../../conf/directive.ts';
import type { Directive } from '../../../conf/directive.ts';
import { flagArg, msecArg, parseNumber, parseSize, parseTime } from '../../../conf/values.ts';
import { setting, unique } from '../../../conf/setters.ts';
import { declareZone, sharedTable } from '../../../core/shared-zone.ts';
import { httpMainOf } from '../../http-conf.ts';
import type { HttpMainConf } from '../../http-conf.ts';
import { finishLevels } from '../../upstream/directives.ts';
import { compileComplex } from '../../../core/variables.ts';
import type { ComplexValue } from '../../../core/variables.ts';
import { CACHE_TAG } from '../../cache/zone.ts';
import type { CacheZone, CacheZoneDecl } from '../../cache/zone.ts';
import type { ValidRule } from '../../cache/validity.ts';

export interface CacheLocConf {
  /** `proxy_cache zone` (false: off; a ComplexValue: a name evaluated per request). */
  zone?: CacheZoneDecl | ComplexValue | false;
  key?: ComplexValue;
  /** `$proxy_host`, for the default key (nginx's ngx_http_proxy_create_key: schema, host, the URI sent upstream). */
  defaultKey?: ComplexValue;
  valid?: ValidRule[];
  methods?: Set<string>;
  minUses?: number;
  bypass?: ComplexValue[];
  noCache?: ComplexValue[];
  /** proxy_cache_use_stale conditions (error, timeout, invalid_header, updating, http_500, ...). */
  useStale?: Set<string>;
  lock?: boolean;
  revalidate?: boolean;
  convertHead?: boolean;
  backgroundUpdate?: boolean;
  lockTimeoutMs?: number;
  lockAgeMs?: number;
}

const CACHE_DEFAULTS = {
  minUses: 1, methods: new Set(['GET', 'HEAD']), useStale: new Set<string>(), lock: false, revalidate: false, convertHead: true, lockTimeoutMs: 5000, lockAgeMs: 5000,
} satisfies CacheLocConf;

/** A module's cache settings per level: `proxy_` makes the slot `proxy_cache_loc`. */
export function cacheSlot(prefix: string) {
  return defineSlot<CacheLocConf, typeof CACHE_DEFAULTS>(prefix + 'cache_loc', () => ({}), inheritUnset, CACHE_DEFAULTS);
}

export type CacheSlot = ReturnType<typeof cacheSlot>;

/** A time in nginx's seconds syntax (ngx_parse_time(…, 1): `1y`, `2M` allowed), in ms; NaN when invalid. */
function secondsMs(v: string): number {
  return parseTime(v, true) * 1000;
}

function timeMs(cf: ConfContext, v: string, what: string): number {
  const n = secondsMs(v);
  if (Number.isNaN(n)) throw cf.error(`invalid ${what} value "${v}"`);
  return n;
}


/** Zones by name, for `proxy_cache $variable` (nginx looks the evaluated name up among the cache paths). */
const zonesByName = new Map<string, CacheZone>();

export function zoneNamed(name: string): CacheZone | undefined {
  return zonesByName.get(name);
}

function cachePath(cf: ConfContext, args: string[]): undefined {
  let levels: number[] = [];
  let name = '';
  let size = 0;
  let inactiveMs = 600_000;
  let maxSize = 0;
  const dir = cf.prefixPath(args[0]);
  for (const a of args.slice(1)) {
    if (a.startsWith('levels=')) {
      levels = a.slice(7).split(':').map(Number);
      if (levels.length > 3 || levels.some((n) => !(n >= 1 && n <= 2))) throw cf.error(`invalid "levels" "${a}"`);
    } else if (a.startsWith('keys_zone=')) {
      const colon = a.indexOf(':', 10);
      name = colon < 0 ? a.slice(10) : a.slice(10, colon);
      size = colon < 0 ? 0 : parseSize(a.slice(colon + 1));
      if (colon < 0 || Number.isNaN(size) || size === 0) throw cf.error(`invalid keys zone size "${a}"`);
      if (size < 8 * 4096) throw cf.error(`zone "${name}" is too small`);
    } else if (a.startsWith('inactive=')) {
      inactiveMs = timeMs(cf, a.slice(9), 'inactive');
    } else if (a.startsWith('max_size=')) {
      maxSize = parseSize(a.slice(9));
      if (Number.isNaN(maxSize)) throw cf.error(`invalid max_size value "${a}"`);
    } else if (a.startsWith('use_temp_path=')) {
      // nginx writes to proxy_temp_path (on) or next to the cache (off) and renames; the cache's own temp directory is equivalent
      if (!['on', 'off'].includes(a.slice(14))) throw cf.error(`invalid use_temp_path value "${a.slice(14)}", it must be "on" or "off"`);
    } else if (/^(min_free|manager_files|manager_sleep|manager_threshold|loader_files|loader_sleep|loader_threshold|purger|purger_files|purger_sleep|purger_threshold)=/.test(a)) {
      // the cache manager and loader run differently here: accepted, without effect
    } else {
      throw cf.error(`invalid parameter "${a}"`);
    }
  }
  if (name === '') throw cf.error(`"${cf.node?.name}" must have "keys_zone" parameter`);
  const decl = declareZone<CacheZone>(cf, name, size, CACHE_TAG);
  if (decl.data) throw cf.error(`duplicate zone "${name}"`);
  // with use_temp_path=on nginx writes to proxy_temp_path and moves the file; a directory inside the cache is equivalent and always on the same file system
  decl.data = { name, path: dir, levels, inactiveMs, maxSize, tempPath: `${dir}/.temp`, table: sharedTable(decl) };
  zonesByName.set(name, decl.data);
  return undefined;
}

const complexList = (cf: ConfContext, args: string[]) => args.map((a) => compileComplex(cf, httpMainOf(cf).variables, a));

/**
 * The `prefix`cache_path, `prefix`cache, `prefix`cache_key… rows writing
 * `slot`. `defaultKey`: the variable the default key is made of (the
 * proxy's `$proxy_host`); without one the module has no default key and
 * `prefix`cache needs `prefix`cache_key (checkCacheKeys).
 */
export function cacheDirectives(prefix: string, cacheLoc: CacheSlot, defaultKey?: string): Directive[] {
  const n = (name: string) => prefix + name;
  return [
    { name: n('cache_path'), contexts: Ctx.HTTP, args: [2, Infinity], handler: (cf, node) => cachePath(cf, node.args) },
    {
      name: n('cache'), contexts: HTTP_ANY, args: 1,
      handler: setting(cacheLoc, 'zone', (cf, a) => {
        if (defaultKey) cf.get(cacheLoc).defaultKey ??= compileComplex(cf, httpMainOf(cf).variables, defaultKey);
        if (a === 'off') return false;
        return a.includes('$') ? compileComplex(cf, httpMainOf(cf).variables, a) : declareZone<CacheZone>(cf, a, 0, CACHE_TAG);
      }),
    },
    { name: n('cache_key'), contexts: HTTP_ANY, args: 1, handler: setting(cacheLoc, 'key', (cf, v) => compileComplex(cf, httpMainOf(cf).variables, v)) },
    {
      name: n('cache_valid'), contexts: HTTP_ANY, args: [1, Infinity],
      handler(cf, node) {
        const c = cf.get(cacheLoc);
        if (!Object.hasOwn(c, 'valid') || !c.valid) c.valid = [];
        const args = node.args;
        const ms = secondsMs(args[args.length - 1]);
        if (Number.isNaN(ms)) return `invalid time value "${args[args.length - 1]}"`;
        // a time alone is for 200, 301 and 302
        const codes = args.length === 1 ? ['200', '301', '302'] : args.slice(0, -1);
        for (const code of codes) {
          const status = code === 'any' ? 0 : parseNumber(code);
          if (code !== 'any' && !(status >= 100 && status <= 599)) return `invalid status "${code}"`;
          c.valid.push({ status, ms });
        }
        return undefined;
      },
    },
    {
      name: n('cache_methods'), contexts: HTTP_ANY, args: [1, Infinity],
      handler: unique(cacheLoc, 'methods', (_cf, node, c) => {
        // GET and HEAD are always cached (nginx adds them)
        const set = new Set(['GET', 'HEAD']);
        for (const m of node.args) {
          if (!['GET', 'HEAD', 'POST'].includes(m)) return `invalid value "${m}"`;
          set.add(m);
        }
        c.methods = set;
      }),
    },
    {
      name: n('cache_min_uses'), contexts: HTTP_ANY, args: 1,
      handler: unique(cacheLoc, 'minUses', (_cf, node, c) => {
        const v = parseNumber(node.args[0]);
        if (!(v >= 0)) return 'invalid number';
        c.minUses = v;
      }),
    },
    { name: n('cache_bypass'), contexts: HTTP_ANY, args: [1, Infinity], handler: (cf, node) => { const c = cf.get(cacheLoc); c.bypass = [...(Object.hasOwn(c, 'bypass') ? c.bypass ?? [] : []), ...complexList(cf, node.args)]; } },
    { name: n('no_cache'), contexts: HTTP_ANY, args: [1, Infinity], handler: (cf, node) => { const c = cf.get(cacheLoc); c.noCache = [...(Object.hasOwn(c, 'noCache') ? c.noCache ?? [] : []), ...complexList(cf, node.args)]; } },
    {
      name: n('cache_use_stale'), contexts: HTTP_ANY, args: [1, Infinity],
      handler: unique(cacheLoc, 'useStale', (_cf, node, c) => {
        const ok = ['error', 'timeout', 'invalid_header', 'updating', 'http_500', 'http_502', 'http_503', 'http_504', 'http_403', 'http_404', 'http_429', 'off'];
        for (const a of node.args) if (!ok.includes(a)) return `invalid value "${a}"`;
        c.useStale = new Set(node.args.filter((a) => a !== 'off'));
      }),
    },
    { name: n('cache_lock'), contexts: HTTP_ANY, args: 'flag', handler: setting(cacheLoc, 'lock', flagArg) },
    { name: n('cache_revalidate'), contexts: HTTP_ANY, args: 'flag', handler: setting(cacheLoc, 'revalidate', flagArg) },
    // the proxy's alone: the other modules send the method as it is
    ...(defaultKey ? [{ name: n('cache_convert_head'), contexts: HTTP_ANY, args: 'flag', handler: setting(cacheLoc, 'convertHead', flagArg) } satisfies Directive] : []),
    { name: n('cache_lock_timeout'), contexts: HTTP_ANY, args: 1, handler: setting(cacheLoc, 'lockTimeoutMs', msecArg) },
    { name: n('cache_lock_age'), contexts: HTTP_ANY, args: 1, handler: setting(cacheLoc, 'lockAgeMs', msecArg) },
    { name: n('cache_background_update'), contexts: HTTP_ANY, args: 'flag', handler: setting(cacheLoc, 'backgroundUpdate', flagArg) },
    // accepted without effect: purge, range offset
    ...[n('cache_max_range_offset')]
      .map((name): Directive => ({ name, contexts: HTTP_ANY, args: 1, handler: () => undefined })),
    { name: n('cache_purge'), contexts: HTTP_ANY, args: [1, Infinity], handler: () => undefined },
  ];
}

/**
 * nginx's merge-time check of a module without a default key
 * (ngx_http_fastcgi_merge_loc_conf and its twins): a server or location
 * that caches without a key is warned about at the end of the http block
 * (`cf`), and its requests then share the empty key.
 */
export function checkCacheKeys(http: HttpMainConf, cf: ConfContext, prefix: string, cacheLoc: CacheSlot): void {
  finishLevels(http, cacheLoc, (c, _parent: undefined, where) => {
    if (where && c.zone && !c.key) cf.warn(`no "${prefix}cache_key" for "${prefix}cache"`);
    return undefined;
  });
}

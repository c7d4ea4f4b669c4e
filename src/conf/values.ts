/**
 * nginx's value parsers and the exact words nginx uses when a value is
 * wrong. A handler that calls these reports what nginx reports:
 *
 *   flagArg     on|off (any case)   invalid value "x" in "name" directive, it must be "on" or "off"
 *   numberArg   ngx_atoi            "name" directive invalid number
 *   sizeArg     N, Nk, Nm           "name" directive invalid value     (ngx_parse_size: no g)
 *   offsetArg   N, Nk, Nm, Ng       "name" directive invalid value     (ngx_parse_offset)
 *   msecArg     1h 30m, 500ms, 10   "name" directive invalid value     (ngx_parse_time, ms; no y/M)
 *   secArg      1y 2M 3w, 10        "name" directive invalid value     (ngx_parse_time, s; no ms)
 *   bufsArg     N size              "name" directive invalid value     (ngx_conf_set_bufs_slot)
 *   enumArg     one of a list       invalid value "x"                  (no directive name)
 *   bitmaskArgs several of a list   invalid value "x"; a repeat warns  duplicate value "x"
 *   choiceOf    one of a list       invalid value "x" in "name" directive, it must be "a" or "b"
 *   countArg    digits              invalid value "x" in "name" directive
 *   stringArg, prefixPathArg, confPathArg: no error of their own
 *
 * "is duplicate" belongs to the setters that store these values
 * (src/conf/setters.ts).
 *
 * All end with ` in file:line` (the directive's `;`). nginx's words differ
 * by directive outside these slots (e.g. `invalid number "x"` for
 * worker_connections): copy those from nginx's source into the handler.
 * A bare number is seconds for both time kinds, `1h30` is 1h 30s.
 */
import type { ConfContext } from './context.ts';

const MAX_INT = 2n ** 63n - 1n;

/** ngx_atoi (also ngx_atosz, ngx_atoof): decimal digits only, no sign; NaN when invalid or past 2^63-1. */
export function parseNumber(s: string): number {
  if (!/^[0-9]+$/.test(s)) return NaN;
  if (s.length > 18 && BigInt(s) > MAX_INT) return NaN;
  return Number(s);
}

function scaled(s: string, units: Record<string, number>): number {
  if (s.length === 0) return NaN;
  const scale = units[s[s.length - 1]];
  const digits = scale ? s.slice(0, -1) : s;
  const n = parseNumber(digits);
  if (Number.isNaN(n) || (scale && BigInt(digits) > MAX_INT / BigInt(scale))) return NaN;
  return n * (scale ?? 1);
}

const SIZE_UNITS: Record<string, number> = { k: 1024, K: 1024, m: 1 << 20, M: 1 << 20 };
const OFFSET_UNITS: Record<string, number> = { ...SIZE_UNITS, g: 1 << 30, G: 1 << 30 };

/** ngx_parse_size: bytes, `k`/`K`, `m`/`M`. NaN when invalid. */
export function parseSize(s: string): number {
  return scaled(s, SIZE_UNITS);
}

/** ngx_parse_offset: bytes, `k`, `m`, `g` (either case). NaN when invalid. */
export function parseOffset(s: string): number {
  return scaled(s, OFFSET_UNITS);
}

const YEAR = 1, MONTH = 2, WEEK = 3, DAY = 4, HOUR = 5, MIN = 6, SEC = 7, MSEC = 8, LAST = 9;
const UNIT: Record<string, [step: number, seconds: number]> = {
  y: [YEAR, 31_536_000], M: [MONTH, 2_592_000], w: [WEEK, 604_800], d: [DAY, 86_400], h: [HOUR, 3600], m: [MIN, 60], s: [SEC, 1],
};

/**
 * ngx_parse_time: `1h 30m`, `500ms`, `10` (seconds). In milliseconds, or in
 * seconds with `inSeconds` (then `ms` is refused; in milliseconds `y` and `M`
 * are). Units must come largest first, each once. NaN when invalid.
 */
export function parseTime(s: string, inSeconds = false): number {
  let step = inSeconds ? 0 : MONTH;
  let valid = false;
  let value = 0;
  let total = 0;
  const toMs = inSeconds ? 1 : 1000;
  let i = 0;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      value = value * 10 + (c - 48);
      valid = true;
      i++;
      continue;
    }
    const ch = s[i++];
    let scale: number;
    if (ch === 'm' && s[i] === 's') {
      if (inSeconds || step >= MSEC) return NaN;
      i++;
      step = MSEC;
      scale = 1;
    } else if (ch === ' ') {
      if (step >= SEC) return NaN;
      step = LAST;
      scale = toMs;
    } else {
      const unit = UNIT[ch];
      // `y` may only come first; every other unit must be smaller than the last
      if (!unit || (unit[0] === YEAR ? step > 0 : step >= unit[0])) return NaN;
      step = unit[0];
      scale = unit[1] * toMs;
    }
    total += value * scale;
    value = 0;
    while (s[i] === ' ') i++;
  }
  if (!valid) return NaN;
  total += value * toMs;
  return total > Number(MAX_INT) ? NaN : total;
}

function invalidValue(cf: ConfContext): Error {
  return cf.error(`"${cf.node?.name}" directive invalid value`);
}

/** `on`/`off` in any case (ngx_conf_set_flag_slot). */
export function flagArg(cf: ConfContext, value: string): boolean {
  const v = value.toLowerCase();
  if (v === 'on') return true;
  if (v === 'off') return false;
  throw cf.error(`invalid value "${value}" in "${cf.node?.name}" directive, it must be "on" or "off"`);
}

/** A number (ngx_conf_set_num_slot). */
export function numberArg(cf: ConfContext, value: string): number {
  const n = parseNumber(value);
  if (Number.isNaN(n)) throw cf.error(`"${cf.node?.name}" directive invalid number`);
  return n;
}

/** A number within `low`..`high` (ngx_conf_set_num_slot with ngx_conf_check_num_bounds, which words its own message). */
export function boundedNumberArg(low: number, high: number): (cf: ConfContext, value: string) => number {
  return (cf, value) => {
    const n = numberArg(cf, value);
    if (n < low || n > high) throw cf.error(`value must be between ${low} and ${high}`);
    return n;
  };
}

/** A size in bytes (ngx_conf_set_size_slot). */
export function sizeArg(cf: ConfContext, value: string): number {
  const n = parseSize(value);
  if (Number.isNaN(n)) throw invalidValue(cf);
  return n;
}

/** A file size or offset in bytes, `g` allowed (ngx_conf_set_off_slot). */
export function offsetArg(cf: ConfContext, value: string): number {
  const n = parseOffset(value);
  if (Number.isNaN(n)) throw invalidValue(cf);
  return n;
}

/** A time in milliseconds (ngx_conf_set_msec_slot). */
export function msecArg(cf: ConfContext, value: string): number {
  const n = parseTime(value);
  if (Number.isNaN(n)) throw invalidValue(cf);
  return n;
}

/** The older name of msecArg. */
export const timeArg = msecArg;

/** A time in seconds (ngx_conf_set_sec_slot). */
export function secArg(cf: ConfContext, value: string): number {
  const n = parseTime(value, true);
  if (Number.isNaN(n)) throw invalidValue(cf);
  return n;
}

/** `number size`, both above zero (ngx_conf_set_bufs_slot). */
export function bufsArg(cf: ConfContext, count: string, size: string): { count: number; size: number } {
  const n = parseNumber(count);
  const sz = parseSize(size);
  if (!(n > 0) || !(sz > 0)) throw invalidValue(cf);
  return { count: n, size: sz };
}

/** One of `values` (ngx_conf_set_enum_slot; exact case). */
export function enumArg<T extends string>(cf: ConfContext, value: string, values: readonly T[]): T {
  // ngx_conf_set_enum_slot compares without case
  const lower = value.toLowerCase();
  const found = values.find((v) => v.toLowerCase() === lower);
  if (found !== undefined) return found;
  throw cf.error(`invalid value "${value}"`);
}

/** Several of `values` (ngx_conf_set_bitmask_slot): a repeat only warns. */
export function bitmaskArgs<T extends string>(cf: ConfContext, args: string[], values: readonly T[]): Set<T> {
  const out = new Set<T>();
  for (const v of args) {
    if (!(values as readonly string[]).includes(v)) throw cf.error(`invalid value "${v}"`);
    if (out.has(v as T)) cf.warn(`duplicate value "${v}"`);
    out.add(v as T);
  }
  return out;
}

/** A string as written (ngx_conf_set_str_slot). */
export const stringArg = (_cf: ConfContext, value: string): string => value;

/** A path under the prefix (ngx_conf_set_path_slot's first argument: temp paths, pid, logs). */
export const prefixPathArg = (cf: ConfContext, value: string): string => cf.prefixPath(value);

/**
 * ngx_conf_set_path_slot (`*_temp_path path [level1 [level2 [level3]]]`): the
 * path under the prefix; each level is a positive number of digits, and
 * together they stay within nginx's bound.
 */
export function tempPathArg(cf: ConfContext, value: string, args: readonly string[]): string {
  let len = 0;
  for (const level of args.slice(1)) {
    const n = parseNumber(level);
    if (Number.isNaN(n) || n === 0) throw invalidValue(cf);
    len += n + 1;
  }
  if (len > 10 + args.length - 1) throw invalidValue(cf);
  return cf.prefixPath(value);
}

/** A path under the configuration directory (certificates, user files: ngx_conf_full_name with conf_prefix). */
export const confPathArg = (cf: ConfContext, value: string): string => cf.confPath(value);

/** enumArg as a parser for src/conf/setters.ts: `setting(slot, 'format', enumOf(['html', 'json']))`. */
export function enumOf<const T extends string>(values: readonly T[]): (cf: ConfContext, value: string) => T {
  return (cf, value) => enumArg(cf, value, values);
}

/**
 * One of `values`, refused with the words nginx's flag slot uses
 * (`invalid value "x" in "name" directive, it must be "a" or "b"`).
 */
export function choiceOf<const T extends string>(values: readonly T[]): (cf: ConfContext, value: string) => T {
  return (cf, value) => {
    if ((values as readonly string[]).includes(value)) return value as T;
    throw cf.error(`invalid value "${value}" in "${cf.node?.name}" directive, it must be ${values.map((x) => `"${x}"`).join(' or ')}`);
  };
}

/** Decimal digits, refused as `invalid value "x" in "name" directive` (no overflow check). */
export function countArg(cf: ConfContext, value: string): number {
  if (!/^\d+$/.test(value)) throw cf.error(`invalid value "${value}" in "${cf.node?.name}" directive`);
  return Number(value);
}

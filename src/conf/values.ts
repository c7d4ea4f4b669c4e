/**
 * nginx's value parsers: sizes (`8k`, `1m`), times (`10s`, `1h 30m`, `500ms`),
 * flags (`on`/`off`), and the "is duplicate" rule for single-valued directives.
 */
import type { ConfContext } from './context.ts';

/** ngx_parse_size: bytes, k/K, m/M, g/G. Returns NaN when invalid. */
export function parseSize(s: string): number {
  const m = /^(\d+)([kKmMgG]?)$/.exec(s);
  if (!m) return NaN;
  const n = Number(m[1]);
  switch (m[2].toLowerCase()) {
    case 'k': return n * 1024;
    case 'm': return n * 1024 * 1024;
    case 'g': return n * 1024 * 1024 * 1024;
    default: return n;
  }
}

const TIME_UNITS: Record<string, number> = {
  ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000, M: 2_592_000_000, y: 31_536_000_000,
};

/**
 * ngx_parse_time in milliseconds: `30`, `30s`, `1h 30m`, `500ms`. A bare
 * number means seconds. Returns NaN when invalid.
 */
export function parseTime(s: string): number {
  const re = /(\d+)\s*(ms|[smhdwMy]?)\s*/gy;
  let total = 0;
  let matched = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s)) !== null) {
    total += Number(m[1]) * TIME_UNITS[m[2] || 's'];
    matched = re.lastIndex;
    if (matched === s.length) break;
  }
  return matched === s.length && s.length > 0 ? total : NaN;
}

/** Argument `i` of the current directive as a size, or nginx's `invalid value` error. */
export function sizeArg(cf: ConfContext, value: string): number {
  const n = parseSize(value);
  if (Number.isNaN(n)) throw cf.error(`"${cf.node?.name}" directive invalid value`);
  return n;
}

export function timeArg(cf: ConfContext, value: string): number {
  const n = parseTime(value);
  if (Number.isNaN(n)) throw cf.error(`"${cf.node?.name}" directive invalid value`);
  return n;
}

export function flagArg(cf: ConfContext, value: string): boolean {
  const v = value.toLowerCase();
  if (v === 'on') return true;
  if (v === 'off') return false;
  throw cf.error(`invalid value "${value}" in "${cf.node?.name}" directive, it must be "on" or "off"`);
}

/** Sets `obj[key]` once; a second time is nginx's `"name" directive is duplicate`. */
export function setOnce<T extends object, K extends keyof T>(cf: ConfContext, obj: T, key: K, value: T[K]): void {
  if (obj[key] !== undefined) throw cf.error(`"${cf.node?.name}" directive is duplicate`);
  obj[key] = value;
}

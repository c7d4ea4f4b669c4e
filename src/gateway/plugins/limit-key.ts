/**
 * The key limit-count and limit-req count by (their `key` and `key_type`):
 * a variable's value, `$a $b` combined (`var_combination`), or the text
 * itself (`constant`); an empty one is the client address, as APISIX's.
 */
import { crc32 } from 'node:zlib';
import type { PluginContext } from './phase-api.ts';
import { resolveVar } from './resolve-var.ts';

export function limitKeyValue(conf: { key: string; key_type: string }, ctx: PluginContext): string {
  let key: string | undefined;
  if (conf.key_type === 'constant') key = conf.key;
  else if (conf.key_type === 'var_combination') key = conf.key.replace(/\$(\w+)/g, (_, v: string) => ctx.variable(v) ?? '');
  else key = ctx.variable(conf.key);
  return key === undefined || key === '' ? ctx.variable('remote_addr') ?? '' : key;
}

const versions = new WeakMap<object, string>();

/** JSON with its keys sorted at every level (APISIX's core.json.stably_encode). */
export function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

/**
 * APISIX's plugin.conf_version: a checksum of the plugin's whole conf. The
 * limiters count per route and conf version, so any change of the plugin's
 * conf starts the counts again, while a change elsewhere in the route keeps them.
 */
export function confVersion(conf: object): string {
  let v = versions.get(conf);
  if (v === undefined) { v = String(crc32(stableJson(conf)) >>> 0); versions.set(conf, v); }
  return v;
}

/** A count given as an integer or as text with variables (`$http_x_limit`), as the limiters' schemas allow. */
export const INTEGER_OR_VAR = (minimum: number) => ({ oneOf: [minimum > 0 ? { type: 'integer', exclusiveMinimum: 0 } : { type: 'integer', minimum }, { type: 'string' }] });

/**
 * The limiters' resolve_var: a string value's variables resolved, and it must then be a whole
 * number, positive (or ≥ 0 with `allowZero`); the reason it is not, else the number.
 */
export function limitNumber(value: number | string, ctx: PluginContext, allowZero = false): number | { error: string } {
  if (typeof value === 'number') return value;
  const text = resolveVar(value, ctx);
  const n = text.trim() === '' ? NaN : Number(text);
  if (Number.isNaN(n)) return { error: `resolved value is not a number: ${text}` };
  if (allowZero ? n < 0 : n <= 0) return { error: `resolved value must be a ${allowZero ? 'non-negative' : 'positive'} number, got: ${n}` };
  if (!Number.isInteger(n)) return { error: `resolved value must be an integer, got: ${n}` };
  if (n > Number.MAX_SAFE_INTEGER) return { error: `resolved value exceeds safe integer range (2^53-1), got: ${n}` };
  return n;
}

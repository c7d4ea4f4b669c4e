/**
 * JSON Schema validation (ajv) with APISIX's error texts. APISIX validates
 * with lua-resty-jsonschema and its Admin API answers that library's
 * messages (`property "methods" validation failed: failed to validate item
 * 1: matches none of the enum values`); ajv decides validity, and the first
 * error in lua-resty-jsonschema's checking order is rephrased here.
 */
import { Ajv } from 'ajv';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { formatLuaNumber } from '../../lua/number-format.ts';

const luaNum = (v: unknown): string => (typeof v === 'number' ? formatLuaNumber(v) : String(v));

export type Schema = Record<string, unknown>;

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

const ajv = new Ajv({ allErrors: true, verbose: true, strict: false, useDefaults: false, allowUnionTypes: true });
ajv.addFormat('ipv4', IPV4);
ajv.addFormat('ipv6', { validate: (s: string) => /^[0-9a-fA-F:.]+$/.test(s) && s.includes(':') && isIpv6(s) });

function isIpv6(s: string): boolean {
  const parts = s.split('::');
  if (parts.length > 2) return false;
  const groups = parts.flatMap((p) => (p === '' ? [] : p.split(':')));
  const v4 = groups.length > 0 && groups[groups.length - 1].includes('.');
  if (v4 && !IPV4.test(groups[groups.length - 1])) return false;
  const hex = v4 ? groups.slice(0, -1) : groups;
  if (!hex.every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return false;
  const count = hex.length + (v4 ? 2 : 0);
  return parts.length === 2 ? count < 8 : count === 8;
}

const compiled = new WeakMap<Schema, ValidateFunction>();

/** undefined when `value` is valid, else lua-resty-jsonschema's message for the first failure. */
export function validate(schema: Schema, value: unknown): string | undefined {
  let fn = compiled.get(schema);
  if (!fn) compiled.set(schema, (fn = ajv.compile(schema)));
  if (fn(value)) return undefined;
  // lua-resty-jsonschema's skip_validation hook (apisix/secret.lua is_secret_ref): a string schema does not check a reference
  const errors = (fn.errors ?? []).filter((e) => !(isSecretRef(e.data) && skipsRef(e.parentSchema)));
  if (errors.length === 0) return undefined;
  return explain(errors, schema);
}

/** `$secret://…` (case as written) or `$env://…` (any case): resolved when used, as APISIX's check_secret_uri. */
export function isSecretRef(v: unknown): v is string {
  return typeof v === 'string' && (v.startsWith('$secret://') || v.slice(0, 7).toUpperCase() === '$ENV://');
}

function skipsRef(s: unknown): boolean {
  const type = (s as Schema | undefined)?.type;
  return type === undefined || type === 'string';
}

/** Lua's `%q`: quotes, escaping backslash, quote and newline. */
function luaQuote(s: string): string {
  return '"' + s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') + '"';
}

/** Lua's type() of a decoded JSON value. */
function luaType(v: unknown): string {
  if (v === null) return 'userdata';
  if (typeof v === 'object') return 'table';
  return typeof v;
}

/** lua-resty-jsonschema's checking order: type, object, array, string, number, enum, combinators. */
const ORDER = [
  'type', 'minProperties', 'maxProperties', 'required', 'properties', 'patternProperties', 'additionalProperties',
  'dependencies', 'dependentRequired', 'dependentSchemas', 'minItems', 'maxItems', 'uniqueItems', 'items',
  'minLength', 'maxLength', 'pattern', 'format', 'minimum', 'exclusiveMinimum', 'maximum', 'exclusiveMaximum',
  'multipleOf', 'enum', 'const', 'allOf', 'anyOf', 'oneOf', 'not', 'if', 'then', 'else',
];
const COMBINATOR = new Set(['anyOf', 'oneOf', 'not', 'if', 'then', 'else']);

function segments(schemaPath: string): string[] {
  return schemaPath.replace(/^#\/?/, '').split('/').filter((s) => s !== '').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** An error's keyword chain, with everything inside a failed anyOf/oneOf/not/if cut (those report as one). */
function chainOf(e: ErrorObject): string[] | undefined {
  const segs = segments(e.schemaPath);
  for (let i = 0; i < segs.length - 1; i++) {
    if (COMBINATOR.has(segs[i]) && !(segs[i] === 'if' && e.keyword === 'if')) return undefined;
    if (segs[i] === 'properties' || segs[i] === 'patternProperties' || segs[i] === 'dependencies' || segs[i] === 'allOf') i++;
  }
  return segs;
}

function rankOf(segs: string[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < segs.length; i++) {
    out.push(ORDER.indexOf(segs[i]));
    if (['properties', 'patternProperties', 'dependencies', 'allOf'].includes(segs[i])) i++;
  }
  return out;
}

function before(a: number[], b: number[]): boolean {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] < b[i];
  return false;
}

function explain(errors: ErrorObject[], schema: Schema): string {
  let best: { e: ErrorObject; segs: string[]; rank: number[] } | undefined;
  for (const e of errors) {
    const segs = chainOf(e);
    if (!segs) continue;
    const rank = rankOf(segs);
    if (!best || before(rank, best.rank)) best = { e, segs, rank };
  }
  if (!best) return 'invalid configuration';
  return phrase(best.e, best.segs, schema);
}

/** Walks the keyword chain from the root, naming each property and item as lua-resty-jsonschema does. */
function phrase(e: ErrorObject, segs: string[], root: Schema): string {
  const instance = e.instancePath.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  let prefix = '';
  let schema: Schema = root;
  let i = 0;
  for (; i < segs.length - 1; i++) {
    const seg = segs[i];
    if (seg === 'properties') {
      const name = segs[++i];
      prefix += `property ${luaQuote(name)} validation failed: `;
      schema = (schema.properties as Record<string, Schema>)[name];
      instance.shift();
    } else if (seg === 'patternProperties') {
      const pat = segs[++i];
      const key = instance.shift() as string;
      prefix += `failed to validate ${key} (matching ${luaQuote(pat)}): `;
      schema = (schema.patternProperties as Record<string, Schema>)[pat];
    } else if (seg === 'items') {
      const idx = Number(instance.shift());
      prefix += `failed to validate item ${idx + 1}: `;
      schema = schema.items as Schema;
    } else if (seg === 'additionalProperties') {
      const key = instance.shift() as string;
      schema = schema.additionalProperties as Schema;
      prefix += `property ${luaQuote(key)} validation failed: `;
    } else if (seg === 'allOf') {
      const n = Number(segs[++i]);
      prefix += `allOf ${n + 1} failed: `;
      schema = (schema.allOf as Schema[])[n];
    } else if (seg === 'dependencies') {
      const name = segs[++i];
      prefix += `failed to validate dependent schema for ${luaQuote(name)}: `;
      schema = (schema.dependencies as Record<string, Schema>)[name];
    }
  }
  return prefix + keywordMessage(e, schema);
}

function keywordMessage(e: ErrorObject, schema: Schema): string {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'type': return `wrong type: expected ${Array.isArray(p.type) ? (p.type as string[]).join(' or ') : p.type}, got ${luaType(e.data)}`;
    case 'required': return `property ${luaQuote(String(p.missingProperty))} is required`;
    case 'additionalProperties': return `additional properties forbidden, found ${p.additionalProperty}`;
    case 'minProperties': return `expect object to have at least ${p.limit} properties`;
    case 'maxProperties': return `expect object to have at most ${p.limit} properties`;
    case 'minItems': return `expect array to have at least ${p.limit} items`;
    case 'maxItems': return `expect array to have at most ${p.limit} items`;
    // ajv's scalar path scans from the end, so i and j come either way round; APISIX names the first pair in order
    case 'uniqueItems': return `expected unique items but items ${Math.min(Number(p.i), Number(p.j)) + 1} and ${Math.max(Number(p.i), Number(p.j)) + 1} are equal`;
    case 'minLength': return `string too short, expected at least ${p.limit}, got ${[...String(e.data)].length}`;
    case 'maxLength': return `string too long, expected at most ${p.limit}, got ${[...String(e.data)].length}`;
    case 'pattern': return `failed to match pattern ${luaQuote(String(p.pattern))} with ${luaQuote(String(e.data))}`;
    // numbers as Lua's tostring writes them (0.00001 is 1e-05)
    case 'minimum': return `expected ${luaNum(e.data)} to be at least ${luaNum(p.limit)}`;
    case 'maximum': return `expected ${luaNum(e.data)} to be at most ${luaNum(p.limit)}`;
    case 'exclusiveMinimum': return `expected ${luaNum(e.data)} to be greater than ${luaNum(p.limit)}`;
    case 'exclusiveMaximum': return `expected ${luaNum(e.data)} to be smaller than ${luaNum(p.limit)}`;
    case 'enum': return 'matches none of the enum values';
    case 'const': return 'failed to check const value';
    case 'not': return "value wasn't supposed to match schema";
    case 'oneOf': return p.passingSchemas
      ? `value should match only one schema, but matches both schemas ${(p.passingSchemas as number[])[0] + 1} and ${(p.passingSchemas as number[])[1] + 1}`
      : 'value should match only one schema, but matches none';
    case 'anyOf': return anyOfMessage(schema.anyOf as Schema[] | undefined);
    case 'if': return `${p.failingKeyword} clause did not match`;
    case 'format': return `failed to validate format ${luaQuote(String(p.format))}`;
    default: return e.message ?? 'invalid';
  }
}

/** `object matches none of the required`, listing the alternatives when each is only a `required` list. */
function anyOfMessage(branches: Schema[] | undefined): string {
  const base = 'object matches none of the required';
  if (!branches || !branches.every((b) => Object.keys(b).length === 1 && Array.isArray(b.required))) return base;
  return `${base}: ${branches.map((b) => JSON.stringify(b.required)).join(' or ')}`;
}

const JSON_TYPES = new Set(['object', 'array', 'table', 'integer', 'string', 'boolean', 'number', 'null', 'function']);
const LISTS = ['enum', 'required', 'allOf', 'anyOf', 'oneOf'];
const SUBS = ['items', 'additionalProperties', 'additionalItems', 'not', 'contains'];
const MAPS = ['properties', 'patternProperties', 'dependencies', 'definitions'];

/**
 * Whether a user's schema can be used at all (APISIX's core.schema.valid:
 * lua-resty-jsonschema generating its validator): undefined, or the error
 * that generation raises (without its Lua source position), else ajv's.
 */
export function schemaError(schema: Schema): string | undefined {
  const err = walkSchema(schema);
  if (err) return err;
  try {
    if (!compiled.has(schema)) compiled.set(schema, ajv.compile(schema));
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

function walkSchema(s: unknown): string | undefined {
  if (!s || typeof s !== 'object' || Array.isArray(s)) return undefined;
  const o = s as Schema;
  const types = o.type;
  if (typeof types === 'string' && !JSON_TYPES.has(types)) return `invalid JSON type: ${types}`;
  if (Array.isArray(types)) for (const t of types) if (!JSON_TYPES.has(String(t))) return `invalid JSON type: ${t}`;
  if (types !== undefined && typeof types !== 'string' && !Array.isArray(types)) return `invalid "type" type: got ${luaType(types)}`;
  for (const k of LISTS) {
    const v = o[k];
    if (v !== undefined && (v === null || typeof v !== 'object')) return `bad argument #1 to 'ipairs' (table expected, got ${luaType(v)})`;
  }
  const subs: unknown[] = [];
  for (const k of SUBS) subs.push(...(Array.isArray(o[k]) ? o[k] as unknown[] : [o[k]]));
  for (const k of ['allOf', 'anyOf', 'oneOf']) if (Array.isArray(o[k])) subs.push(...o[k] as unknown[]);
  for (const k of MAPS) if (o[k] && typeof o[k] === 'object') subs.push(...Object.values(o[k] as object));
  for (const sub of subs) {
    const err = walkSchema(sub);
    if (err) return err;
  }
  return undefined;
}

/**
 * `$env://` and `$secret://` references in an object's fields
 * (apisix/secret.lua fetch_secrets, apisix/core/env.lua fetch_by_uri),
 * resolved when the object is used. `$env://NAME` is the worker's
 * environment variable NAME; `$env://NAME/field` reads `field` of NAME's
 * JSON value. `$secret://manager/id/key` names a secret manager Gatehouse
 * does not fetch from (vault, aws, gcp need their services): it does not
 * resolve, and the field's user logs why.
 */
import { isSecretRef } from '../schema/validate.ts';

export { isSecretRef };

/** The value a reference names, or the reason it has none (APISIX's wording). */
export function fetchRef(uri: string): { value: string } | { error: string } {
  if (uri.slice(0, 7).toUpperCase() === '$ENV://') {
    const path = uri.slice(7);
    const slash = path.indexOf('/');
    const name = slash < 0 ? path : path.slice(0, slash);
    const main = process.env[name];
    if (main === undefined) return { error: 'no value' };
    if (slash < 0 || slash === path.length - 1) return { value: main };
    let parsed: unknown;
    try { parsed = JSON.parse(main); } catch (e) { return { error: `decode failed, err: ${(e as Error).message}, value: ${main}` }; }
    const v = (parsed as Record<string, unknown> | null)?.[path.slice(slash + 1)];
    return typeof v === 'string' ? { value: v } : { error: 'no value' };
  }
  const parts = uri.slice('$secret://'.length).split('/');
  if (parts.length < 2) return { error: 'error format: no secret manager' };
  if (parts.length < 3) return { error: 'error format: no secret conf id' };
  if (parts.slice(2).join('/') === '') return { error: 'error format: no secret key id' };
  return { error: `no secret manager: ${parts[0]} (Gatehouse resolves $env:// references only)` };
}

/**
 * A copy of `obj` with each reference among `fields` (strings, arrays of
 * strings, and `client.ca` as "client.ca") resolved; throws the first one
 * that does not resolve, as the error to log.
 */
export function resolveRefs<T extends object>(obj: T, fields: string[]): T {
  const out = structuredClone(obj) as Record<string, unknown>;
  const one = (v: unknown, field: string): unknown => {
    if (!isSecretRef(v)) return v;
    const r = fetchRef(v);
    if ('error' in r) throw new Error(`failed to resolve secret reference: ${v}, field: ${field}, err: ${r.error}`);
    return r.value;
  };
  for (const f of fields) {
    const [a, b] = f.split('.');
    const holder = (b === undefined ? out : out[a]) as Record<string, unknown> | undefined;
    const k = b ?? a;
    if (!holder || holder[k] === undefined) continue;
    holder[k] = Array.isArray(holder[k]) ? (holder[k] as unknown[]).map((v, i) => one(v, `${k}[${i + 1}]`)) : one(holder[k], k);
  }
  return out as T;
}

/**
 * PATCH's two forms (apisix/core/table.lua merge and patch): a recursive
 * merge where `null` deletes a key and arrays are replaced whole, and a
 * sub-path write that replaces one value, creating missing objects.
 */
type Json = unknown;

function isObject(v: Json): v is Record<string, Json> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export function mergePatch(origin: Json, extend: Json): Json {
  if (!isObject(origin) || !isObject(extend)) return extend;
  const out: Record<string, Json> = { ...origin };
  for (const [k, v] of Object.entries(extend)) {
    if (v === null) delete out[k];
    else if (isObject(v) && isObject(out[k])) out[k] = mergePatch(out[k], v);
    else out[k] = v;
  }
  return out;
}

/** Replaces the value at `a/b/c`; an error message when a step on the way is not an object. */
export function patchSubPath(origin: Record<string, Json>, subPath: string, value: Json): Record<string, Json> | string {
  const segs = subPath.split('/').filter((s) => s !== '');
  const root = structuredClone(origin);
  let node: Record<string, Json> = root;
  for (let i = 0; i < segs.length - 1; i++) {
    const next = node[segs[i]];
    if (next === undefined) node[segs[i]] = {};
    else if (!isObject(next)) return `invalid sub-path: /${subPath}`;
    node = node[segs[i]] as Record<string, Json>;
  }
  node[segs[segs.length - 1]] = value;
  return root;
}

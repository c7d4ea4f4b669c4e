/**
 * Reading config.yaml's values with errors that name the key
 * (`apisix.node_listen[1].port: expected a port number (1-65535), got "x"`).
 */
export class ConfigError extends Error {}

export interface Listen { ip?: string; port: number }

export type Obj = Record<string, unknown>;

export function isObj(v: unknown): v is Obj {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Reads `a.b.c`, checking that each step is a mapping. */
export function at(root: Obj, path: string): unknown {
  let node: unknown = root;
  const parts = path.split('.');
  for (let i = 0; i < parts.length; i++) {
    if (node === undefined || node === null) return undefined;
    if (!isObj(node)) throw new ConfigError(`${parts.slice(0, i).join('.')}: expected a mapping`);
    node = node[parts[i]];
  }
  return node;
}

export function port(v: unknown, key: string): number {
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 65535) {
    throw new ConfigError(`${key}: expected a port number (1-65535), got ${JSON.stringify(v)}`);
  }
  return n;
}

export function bool(v: unknown, key: string, def: boolean): boolean {
  if (v === undefined || v === null) return def;
  if (typeof v !== 'boolean') throw new ConfigError(`${key}: expected true or false, got ${JSON.stringify(v)}`);
  return v;
}

export function str(v: unknown, key: string, def: string): string {
  if (v === undefined || v === null) return def;
  if (typeof v !== 'string' && typeof v !== 'number') throw new ConfigError(`${key}: expected a string, got ${JSON.stringify(v)}`);
  return String(v);
}

/** `node_listen`: a port, a list of ports, or a list of `{ip, port}`. */
export function listens(v: unknown, key: string, def: number): Listen[] {
  if (v === undefined || v === null) return [{ port: def }];
  const list = Array.isArray(v) ? v : [v];
  return list.map((item, i) => {
    const k = Array.isArray(v) ? `${key}[${i + 1}]` : key;
    if (isObj(item)) {
      const ip = item.ip === undefined ? undefined : str(item.ip, `${k}.ip`, '');
      return { ip, port: port(item.port, `${k}.port`) };
    }
    return { port: port(item, k) };
  });
}

export function optionalStr(v: unknown, key: string): string | undefined {
  return v === undefined || v === null ? undefined : str(v, key, '');
}


export function seconds(v: unknown, key: string, def: number): number {
  if (v === undefined || v === null) return def;
  const n = typeof v === 'string' && /^\d+(\.\d+)?$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !(n > 0)) throw new ConfigError(`${key}: expected a number of seconds, got ${JSON.stringify(v)}`);
  return n;
}

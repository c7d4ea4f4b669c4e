/**
 * Custom plugins (Gatehouse's own, beyond APISIX, which needs Lua or an
 * out-of-process runner): every `.ts`, `.js` or `.mjs` file in the
 * directory config.yaml names (`gatehouse.plugins_dir`) is a plugin with
 * the same shape as the built-in ones (registry.ts, phase-api.ts), its
 * default export (or an export named `plugin`). A file that does not load
 * or does not have the shape is left out with the reason in the error log;
 * the others load. docs/gateway.md shows one.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { GatewayPlugin } from './registry.ts';

const PHASES = ['rewrite', 'access', 'headerFilter', 'log', 'replaceBody'];

/** Why `p` is not a plugin, or undefined when it is one. */
function shapeError(p: unknown, taken: Set<string>): string | undefined {
  if (p === null || typeof p !== 'object') return 'no default export (or `plugin` export) with the plugin';
  const o = p as Record<string, unknown>;
  if (typeof o.name !== 'string' || !/^[a-z0-9][a-z0-9_-]*$/.test(o.name)) return '`name` must be a plugin name (lowercase letters, digits, - and _)';
  if (taken.has(o.name)) return `plugin "${o.name}" is already defined`;
  if (typeof o.priority !== 'number' || !Number.isInteger(o.priority)) return '`priority` must be an integer';
  if (o.schema === null || typeof o.schema !== 'object' || Array.isArray(o.schema)) return '`schema` must be a JSON schema object';
  for (const f of PHASES) if (o[f] !== undefined && typeof o[f] !== 'function') return `\`${f}\` must be a function`;
  if (o.type !== undefined && o.type !== 'auth') return '`type` may only be "auth"';
  return undefined;
}

export async function loadCustomPlugins(dir: string, builtin: GatewayPlugin[], log: (msg: string) => void): Promise<GatewayPlugin[]> {
  let files: string[];
  try {
    files = fs.readdirSync(dir).filter((f) => /\.(m?js|ts)$/.test(f) && !f.endsWith('.d.ts')).sort();
  } catch (e) {
    log(`failed to read the plugins directory ${dir}: ${(e as Error).message}`);
    return [];
  }
  const taken = new Set(builtin.map((p) => p.name));
  const loaded: GatewayPlugin[] = [];
  for (const f of files) {
    const file = path.join(dir, f);
    let mod: Record<string, unknown>;
    try {
      mod = await import(pathToFileURL(file).href) as Record<string, unknown>;
    } catch (e) {
      log(`failed to load plugin ${file}: ${(e as Error).message}`);
      continue;
    }
    const p = mod.default ?? mod.plugin;
    const err = shapeError(p, taken);
    if (err) {
      log(`failed to load plugin ${file}: ${err}`);
      continue;
    }
    const plugin = p as GatewayPlugin;
    plugin.version ??= 0.1;
    taken.add(plugin.name);
    loaded.push(plugin);
  }
  return loaded;
}

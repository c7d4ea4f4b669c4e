/**
 * `load_module file.ts;` (nginx's ngx_load_module for a module that is not
 * built in): the file is imported (Node's require of an ES module, so the
 * configuration is still read synchronously) and the module object it
 * exports joins the cycle's modules, after the built-in ones, with its
 * directives, variables and hooks. The master (and `-t`) and every worker
 * thread read the configuration, so each imports the file itself; a reload
 * reuses what this process imported before.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { ConfContext } from '../conf/context.ts';
import type { ModuleBase } from '../conf/registry.ts';

const requireModule = createRequire(import.meta.url);

/** Files `load_module` imports rather than looks up among the built-in modules. */
export function isModuleScript(file: string): boolean {
  return /\.(?:ts|js|mjs)$/.test(file);
}

function isModule(v: unknown): v is ModuleBase {
  return typeof v === 'object' && v !== null && typeof (v as ModuleBase).name === 'string';
}

/** The file's default export, or else its only export that is a module object. */
function moduleOf(ns: Record<string, unknown>): ModuleBase | undefined {
  if (isModule(ns.default)) return ns.default;
  const found = Object.values(ns).filter(isModule);
  return found.length === 1 ? found[0] : undefined;
}

/** Imports `file` (a full path) and adds its module to the registry, with nginx's messages on failure. */
export function loadModuleFile(cf: ConfContext, file: string): void {
  let ns: Record<string, unknown>;
  try {
    // as dlopen()'s message for a missing file
    if (!fs.existsSync(file)) throw new Error(`${file}: cannot open shared object file: No such file or directory`);
    ns = requireModule(file) as Record<string, unknown>;
  } catch (err) {
    const msg = (err as Error).message.split('\n')[0];
    throw cf.error(`dlopen() "${file}" failed (${msg.startsWith(file) ? msg : `${file}: ${msg}`})`);
  }
  const m = moduleOf(ns);
  if (!m) throw cf.error(`dlsym() "${file}", "module" failed (no module object exported)`);
  if (cf.registry.modules.some((have) => have.name === m.name)) throw cf.error(`module "${m.name}" is already loaded`);
  cf.registry.add(m);
}

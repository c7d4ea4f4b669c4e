/**
 * The directive registry: every module's directive table by name, and the
 * walk that applies a block's directives in order with nginx's checks
 * (unknown, not allowed here, argument count, block or not).
 */
import { ConfError } from './errors.ts';
import type { Directive } from './directive.ts';
import { argsAllowed } from './directive.ts';
import type { ConfContext } from './context.ts';
import type { ConfNode } from './parser.ts';

/** What every module exports: its name and directive table (plus kind-specific hooks). */
export interface ModuleBase {
  /** nginx's module name, e.g. `ngx_http_rewrite_module`. */
  name: string;
  directives?: Directive[];
}

export class Registry {
  private readonly byName = new Map<string, Directive[]>();
  readonly modules: ModuleBase[];

  constructor(modules: ModuleBase[]) {
    this.modules = modules;
    for (const m of modules) {
      for (const d of m.directives ?? []) {
        const list = this.byName.get(d.name);
        if (list) list.push(d);
        else this.byName.set(d.name, [d]);
      }
    }
  }

  lookup(name: string): Directive[] | undefined {
    return this.byName.get(name);
  }

  /** Every module of the given kind (filtering by a type guard). */
  of<T extends ModuleBase>(guard: (m: ModuleBase) => m is T): T[] {
    return this.modules.filter(guard);
  }
}

/** Applies `nodes` in order in the context `cf` (ngx_conf_handler). */
export function applyBlock(cf: ConfContext, nodes: ConfNode[]): void {
  for (const node of nodes) applyDirective(cf, node);
}

export function applyDirective(cf: ConfContext, node: ConfNode): void {
  const candidates = cf.registry.lookup(node.name);
  const at = (msg: string) => new ConfError(msg, node.file, node.line);
  if (!candidates) throw at(`unknown directive "${node.name}"`);
  for (const d of candidates) {
    if (!(d.contexts & cf.ctx)) continue;
    if (!d.block && node.children) throw at(`directive "${node.name}" is not terminated by ";"`);
    if (d.block && !node.children) throw at(`directive "${node.name}" has no opening "{"`);
    if (!argsAllowed(d.args, node.args.length)) throw at(`invalid number of arguments in "${node.name}" directive`);
    const saved = cf.node;
    cf.node = node;
    try {
      const rv = d.handler(cf, node);
      if (typeof rv === 'string') throw at(`"${node.name}" directive ${rv}`);
    } finally {
      cf.node = saved;
    }
    return;
  }
  throw at(`"${node.name}" directive is not allowed here`);
}

/**
 * The directive registry: every module's directive table by name, and the
 * walk that applies a block's directives in order with nginx's checks
 * (ngx_conf_handler: unknown, not allowed here, `;` or `{`, argument count).
 */
import { ConfError } from './errors.ts';
import type { Directive } from './directive.ts';
import { argsAllowed, Ctx } from './directive.ts';
import type { ConfContext } from './context.ts';
import type { ConfBlock, ConfNode } from './parser.ts';

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
    // a copy: `load_module` adds to this cycle's list only
    this.modules = [];
    for (const m of modules) this.add(m);
  }

  /** Adds a module and its directives (the built-in ones, then those `load_module` imports). */
  add(m: ModuleBase): void {
    this.modules.push(m);
    for (const d of m.directives ?? []) {
      const list = this.byName.get(d.name);
      if (list) list.push(d);
      else this.byName.set(d.name, [d]);
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

/**
 * Applies `nodes` in order in the context `cf`; then raises the syntax error
 * that cut this list short, if any (see parser.ts), as nginx would have here.
 */
export function applyBlock(cf: ConfContext, nodes: ConfBlock): void {
  for (const node of nodes) applyDirective(cf, node);
  if (nodes.syntaxError) throw nodes.syntaxError;
}

/**
 * For handlers that read a block's entries themselves (`types`, `map`, ...):
 * raises the syntax error that cut the block short, if any. Call it after
 * the entries and before checks of the whole block, where nginx stops.
 */
export function endOfEntries(children: ConfBlock): void {
  if (children.syntaxError) throw children.syntaxError;
}

export function applyDirective(cf: ConfContext, node: ConfNode): void {
  const candidates = cf.registry.lookup(node.name);
  const at = (msg: string) => new ConfError(msg, node.file, node.line);
  if (!candidates) throw at(`unknown directive "${node.name}"`);
  for (const d of candidates) {
    if (!(d.contexts & cf.ctx)) continue;
    if (!d.block && node.children) throw at(`directive "${node.name}" is not terminated by ";"`);
    if (d.block && !node.children && !node.luaBlock) throw at(`directive "${node.name}" has no opening "{"`);
    if (!argsAllowed(d.args, node.args.length)) throw at(`invalid number of arguments in "${node.name}" directive`);
    // once a main-level block (events, http, ...) is read, nginx's module list is fixed
    if (cf.ctx === Ctx.MAIN && node.children) cf.data.modulesUsed = true;
    const savedNode = cf.node;
    const savedBodyRead = cf.bodyRead;
    cf.node = node;
    // a Lua block's handler runs after its body was read, so at its `}`
    cf.bodyRead = node.luaBlock === true;
    try {
      const rv = d.handler(cf, node);
      if (typeof rv === 'string') throw cf.error(`"${node.name}" directive ${rv}`);
    } finally {
      cf.node = savedNode;
      cf.bodyRead = savedBodyRead;
    }
    return;
  }
  throw at(`"${node.name}" directive is not allowed here`);
}

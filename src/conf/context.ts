/**
 * Where configuration lands while it is read: typed slots of module
 * configuration attached to levels (main, http, server, location, ...), and
 * the context a directive handler runs in.
 */
import { ConfError } from './errors.ts';
import type { ConfBlock, ConfNode } from './parser.ts';
import { fullName } from './parser.ts';
import type { Registry } from './registry.ts';
import { applyBlock } from './registry.ts';

/**
 * A typed piece of one module's configuration, created lazily on each level
 * where it is used and merged from parent to child level (nginx's
 * create_*_conf / merge_*_conf).
 *
 * `Raw` is what directives write (fields unset until a directive sets them);
 * `Merged` is what run-time code reads once the http (or stream) block has
 * been merged: the fields that have defaults are then always present.
 */
export interface ConfSlot<Raw, Merged = Raw> {
  readonly name: string;
  /** Its place in every level's array of confs (nginx's ctx_index). */
  readonly index: number;
  create(): Raw;
  /** Fills what `child` left unset from `parent`. */
  merge?(parent: Raw, child: Raw): void;
  /** Values for what is still unset at the top level (nginx's defaults). */
  readonly defaults?: Partial<Raw>;
  /** Type only, never set: the merged configuration's type, for Level.get. */
  readonly merged?: Merged;
}

/** `Raw` with every field named in `Defaults` present (what a merge with defaults leaves). */
export type Complete<Raw, Defaults> = Raw & { [K in keyof Defaults & keyof Raw]-?: Exclude<Raw[K], undefined> };

/** The configuration run-time code reads from a slot: `MergedConf<typeof coreLoc>`. */
export type MergedConf<S> = S extends ConfSlot<unknown, infer M> ? M : never;

const allSlots: ConfSlot<unknown>[] = [];

/**
 * Declares a slot. `Defaults` (the type of `defaults`, e.g.
 * `defineSlot<CoreLocConf, typeof CORE_LOC_DEFAULTS>`) names the fields that
 * merged configuration always has; a slot without defaults reads as written.
 */
export function defineSlot<Raw, Defaults extends Partial<Raw> = Record<never, never>>(
  name: string, create: () => Raw, merge?: (parent: Raw, child: Raw) => void, defaults?: Defaults,
): ConfSlot<Raw, Complete<Raw, Defaults>> {
  const s: ConfSlot<Raw, Complete<Raw, Defaults>> = { name, index: allSlots.length, create, merge, defaults };
  allSlots.push(s as ConfSlot<unknown>);
  return s;
}

/**
 * The common merge: every property the child left `undefined` comes from the
 * parent. Suits configs whose fields are all "unset until written".
 */
export function inheritUnset<T extends object>(parent: T, child: T): void {
  const c = child as Record<string, unknown>;
  const p = parent as Record<string, unknown>;
  // for-in allocates no key array; every level of every server and location merges here
  for (const k in p) if (c[k] === undefined) c[k] = p[k];
}

/** One configuration level (main, http, server, location, if, ...). */
export class Level {
  /**
   * By slot index, as nginx's ctx arrays: run time reads a handful of slots
   * per request, and an element load is cheaper than a Map lookup.
   */
  private readonly confs: unknown[] = [];
  readonly parent: Level | undefined;

  constructor(parent?: Level) {
    this.parent = parent;
  }

  /**
   * The slot's configuration as run time reads it: merged, so every field
   * with a default is present (read after the block's merge; during reading
   * directives use ConfContext.get).
   */
  get<R, M>(slot: ConfSlot<R, M>): M {
    return this.raw(slot) as unknown as M;
  }

  /** The slot's configuration as directives write it (fields unset until set), created on first use. */
  raw<R, M>(slot: ConfSlot<R, M>): R {
    let c = this.confs[slot.index] as R | undefined;
    if (c === undefined) {
      c = slot.create();
      this.confs[slot.index] = c;
    }
    return c;
  }

  has(slot: ConfSlot<unknown>): boolean {
    return this.confs[slot.index] !== undefined;
  }

  /** Fills unset values of every slot that has defaults (done once, on the top level of a block kind). */
  applyDefaults(): void {
    for (const s of allSlots) if (s.defaults) inheritUnset(s.defaults as object, this.raw(s) as object);
  }

  /** Merges every slot that has a merge function from `parent` into this level. */
  mergeFrom(parent: Level): void {
    for (const s of allSlots) {
      if (!s.merge) continue;
      if (!parent.has(s) && !this.has(s)) continue;
      s.merge(parent.raw(s), this.raw(s));
    }
  }
}

/** Paths and options that hold for the whole configuration. */
export interface ConfPaths {
  /** nginx's prefix (-p), with a trailing slash. */
  prefix: string;
  /** Directory of the main configuration file. */
  confPrefix: string;
  confFile: string;
}

/** Receives nginx's `[warn]` lines of a configuration being read (`in file:line` included). */
export type ConfWarningSink = (warning: ConfError) => void;

/** The state a directive handler sees (nginx's ngx_conf_t). */
export class ConfContext {
  readonly registry: Registry;
  readonly paths: ConfPaths;
  /** The Ctx bit of the block being read. */
  ctx: number;
  /** The level directives of this block write to. */
  level: Level;
  /** Levels of enclosing blocks by kind, e.g. main, http, server. */
  readonly levels: Record<string, Level>;
  /** The directive being applied (for error locations). */
  node: ConfNode | undefined;
  /**
   * Whether the current block directive's body has been read: nginx reports
   * what its handler finds after that (e.g. "no servers are inside
   * upstream") at the closing `}`.
   */
  bodyRead = false;
  /** Free-form per-block data for block handlers (the server being built, ...). */
  readonly data: Record<string, unknown>;
  private readonly onWarning: ConfWarningSink | undefined;

  constructor(registry: Registry, paths: ConfPaths, ctx: number, level: Level, levels: Record<string, Level>, data: Record<string, unknown> = {}, onWarning?: ConfWarningSink) {
    this.registry = registry;
    this.paths = paths;
    this.ctx = ctx;
    this.level = level;
    this.levels = levels;
    this.data = data;
    this.onWarning = onWarning;
  }

  /** A ConfError at the current directive (`in file:line`, nginx's line for it). */
  error(message: string): ConfError {
    const n = this.node;
    return new ConfError(message, n?.file, this.bodyRead ? n?.endLine ?? n?.line : n?.line);
  }

  /**
   * Logs nginx's `[warn] message in file:line` for the current directive
   * (without the place when `located` is false, as for checks made after
   * reading); reading goes on. `level` is another level nginx logs such a
   * message at (`alert` for `lua_code_cache off`).
   */
  warn(message: string, located = true, level: 'warn' | 'alert' = 'warn'): void {
    if (!this.onWarning) return;
    const e = located ? this.error(message) : new ConfError(message);
    e.level = level;
    this.onWarning(e);
  }

  /** nginx's `invalid value "x" in "name" directive` family, at the current directive. */
  invalid(value: string, extra = ''): ConfError {
    return this.error(`invalid value "${value}" in "${this.node?.name}" directive${extra}`);
  }

  /** The slot on the current level, as directives write it. */
  get<R, M>(slot: ConfSlot<R, M>): R {
    return this.level.raw(slot);
  }

  /** The slot on the enclosing level of kind `kind` (e.g. 'main', 'http', 'server'). */
  at<R, M>(kind: string, slot: ConfSlot<R, M>): R {
    const l = this.levels[kind];
    if (!l) throw this.error(`internal: no "${kind}" level for "${this.node?.name}"`);
    return l.raw(slot);
  }

  /**
   * Reads a nested block with the given context bit and level, as
   * `http {}`, `server {}` and `location {}` handlers do.
   */
  block(children: ConfBlock, ctx: number, level: Level, kind: string, data: Record<string, unknown> = {}): ConfContext {
    const sub = new ConfContext(this.registry, this.paths, ctx, level, { ...this.levels, [kind]: level }, { ...this.data, ...data }, this.onWarning);
    applyBlock(sub, children);
    this.bodyRead = true;
    return sub;
  }

  /** A path relative to the prefix (pid, logs, root, temp paths), joined as nginx does (no `..` folding). */
  prefixPath(p: string): string {
    return fullName(this.paths.prefix, p);
  }

  /** A path relative to the configuration directory (include, certificates, user files), joined as nginx does. */
  confPath(p: string): string {
    return fullName(this.paths.confPrefix, p);
  }
}

/**
 * Variables: a registry built once per configuration (nginx's
 * cmcf->variables), each variable addressed by index so a request caches
 * values in a flat array, and "complex values" — strings such as
 * `"$scheme://$host$request_uri"` compiled into functions of the request.
 * Written once for both subsystems: http names its host `HttpRequest`
 * (HttpVariable in src/http/http-conf.ts), stream its `StreamSession`.
 */
import type { ConfContext } from '../conf/context.ts';

/** A variable's value; `undefined` is nginx's "not found" (logged as `-`). */
export type VarValue = string | undefined;

/**
 * What variables are evaluated for: an http request, or a stream session
 * (src/stream), which keep the same per-connection cache and captures.
 */
export interface VariableHost {
  /** Values by variable index, cached where nginx caches them. */
  varCache: VarValue[];
  /** Regex captures ($0..$9) of the last matching regex. */
  captures: string[] | undefined;
}

export interface VariableDef<R extends VariableHost = VariableHost> {
  /** Full name, or the prefix (`http_`, `arg_`, ...) when `prefix` is set. */
  name: string;
  prefix?: boolean;
  /** Computes the value; `name` is the full variable name (for prefixes). */
  get(r: R, name: string): VarValue;
  /** Writable variables (`$args`, `$limit_rate`); otherwise `set` makes a user variable. */
  set?(r: R, value: string, name: string): void;
  /** Recomputed on every use (nginx's NGX_HTTP_VAR_NOCACHEABLE). */
  noCache?: boolean;
  /** `set` may assign it (nginx's NGX_HTTP_VAR_CHANGEABLE); implied by `set`. */
  changeable?: boolean;
}

/** Placeholder for a name used before (or without) its definition. */
const UNKNOWN: VariableDef<VariableHost> = { name: '', get: () => undefined };

interface Indexed<R extends VariableHost> {
  def: VariableDef<R>;
  name: string;
  index: number;
}

/**
 * Variable names are caseless, as nginx lowercases them when a variable is
 * added and when a name is looked up (`set $Var` is `$var`).
 */
export class VariableRegistry<R extends VariableHost = VariableHost> {
  private readonly defs = new Map<string, VariableDef<R>>();
  private readonly prefixes: VariableDef<R>[] = [];
  private readonly indexed = new Map<string, Indexed<R>>();
  private readonly list: Indexed<R>[] = [];

  define(def: VariableDef<R>): void {
    if (def.name !== def.name.toLowerCase()) def = { ...def, name: def.name.toLowerCase() };
    if (def.prefix) this.prefixes.push(def);
    else {
      this.defs.set(def.name, def);
      // a name used before its definition (map, set further down) gets it now
      const ix = this.indexed.get(def.name);
      if (ix) ix.def = def;
    }
  }

  /** Whether `name` is defined (directly or through a prefix). */
  has(name: string): boolean {
    name = name.toLowerCase();
    return this.defs.has(name) || this.prefixes.some((p) => name.startsWith(p.name));
  }

  /** The definition that handles `name`, or undefined. */
  lookup(name: string): VariableDef<R> | undefined {
    name = name.toLowerCase();
    const d = this.defs.get(name);
    if (d) return d;
    let best: VariableDef<R> | undefined;
    for (const p of this.prefixes) if (name.startsWith(p.name) && (!best || p.name.length > best.name.length)) best = p;
    return best;
  }

  /**
   * A stable index for `name`, used as the per-request cache slot. As in
   * nginx, a name may be used before it is defined (a `map` or `set` further
   * down); unresolved() lists those still unknown when the http block ends.
   */
  index(name: string): number {
    name = name.toLowerCase();
    let ix = this.indexed.get(name);
    if (!ix) {
      ix = { def: this.lookup(name) ?? UNKNOWN, name, index: this.list.length };
      this.indexed.set(name, ix);
      this.list.push(ix);
    }
    return ix.index;
  }

  /** The first name used but never defined (nginx's `unknown "name" variable`). */
  unresolved(): string | undefined {
    for (const ix of this.list) {
      if (ix.def !== UNKNOWN) continue;
      const def = this.lookup(ix.name);
      if (!def) return ix.name;
      ix.def = def;
    }
    return undefined;
  }

  get size(): number {
    return this.list.length;
  }

  /** The value of variable `index` for request `r`, cached where nginx caches it. */
  value(r: R, index: number): VarValue {
    const ix = this.list[index];
    const cache = r.varCache;
    if (!ix.def.noCache && index in cache) return cache[index];
    const v = ix.def.get(r, ix.name);
    if (!ix.def.noCache) cache[index] = v;
    return v;
  }

  /**
   * Sets variable `index` for request `r` (the `set` directive); undefined
   * (Lua's nil) leaves it "not found", or empty where a handler sets it.
   */
  assign(r: R, index: number, value: VarValue): void {
    const ix = this.list[index];
    if (ix.def.set) ix.def.set(r, value ?? '', ix.name);
    else r.varCache[index] = value;
  }

  /** Reads a variable by name at run time (Lua's ngx.var, SSI); undefined when unknown. */
  valueByName(r: R, name: string): VarValue {
    name = name.toLowerCase();
    if (!this.indexed.has(name) && !this.lookup(name)) return undefined;
    return this.value(r, this.index(name));
  }
}

/** One piece of a compiled string. */
type Part = string | { index: number } | { capture: number };

/** A string with variables, compiled once: nginx's ngx_http_complex_value_t (ngx_stream_complex_value_t). */
export interface ComplexValue<R extends VariableHost = VariableHost> {
  /** The text when it has no variables. */
  readonly constant: string | undefined;
  readonly source: string;
  evaluate(r: R): string;
}

const NAME = /[A-Za-z0-9_]/;

/**
 * Compiles `text` into a ComplexValue. Unknown variables are nginx's
 * configuration error `unknown "name" variable`.
 */
export function compileComplex<R extends VariableHost = VariableHost>(cf: ConfContext | undefined, vars: VariableRegistry<R>, text: string): ComplexValue<R> {
  const parts: Part[] = [];
  let lit = '';
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    if (ch !== '$') { lit += ch; i++; continue; }
    let name = '';
    let j = i + 1;
    if (text[j] === '{') {
      const end = text.indexOf('}', j);
      if (end < 0) throw confError(cf, `the closing bracket in "${text.slice(j + 1)}" variable is missing`);
      name = text.slice(j + 1, end);
      j = end + 1;
    } else if (text[j] !== undefined && /[0-9]/.test(text[j])) {
      name = text[j];
      j++;
    } else {
      while (j < text.length && NAME.test(text[j])) name += text[j++];
    }
    if (name === '') throw confError(cf, 'invalid variable name');
    if (lit) { parts.push(lit); lit = ''; }
    if (/^[0-9]$/.test(name)) parts.push({ capture: Number(name) });
    else {
      parts.push({ index: vars.index(name) });
    }
    i = j;
  }
  if (lit) parts.push(lit);
  return makeComplex(vars, text, parts);
}

function confError(cf: ConfContext | undefined, msg: string): Error {
  return cf ? cf.error(msg) : new Error(msg);
}

function makeComplex<R extends VariableHost>(vars: VariableRegistry<R>, source: string, parts: Part[]): ComplexValue<R> {
  if (parts.every((p) => typeof p === 'string')) {
    const constant = parts.join('');
    return { constant, source, evaluate: () => constant };
  }
  const evalPart = (r: R, p: Part): string => {
    if (typeof p === 'string') return p;
    if ('index' in p) return vars.value(r, p.index) ?? '';
    return r.captures?.[p.capture] ?? '';
  };
  if (parts.length === 1) {
    const only = parts[0];
    return { constant: undefined, source, evaluate: (r) => evalPart(r, only) };
  }
  return {
    constant: undefined,
    source,
    evaluate(r) {
      let s = '';
      for (const p of parts) s += evalPart(r, p);
      return s;
    },
  };
}

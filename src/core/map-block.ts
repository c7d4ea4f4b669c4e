/**
 * The `map source $variable { key value; ... }` block, shared by
 * ngx_http_map_module and ngx_stream_map_module (which read and match maps
 * the same way).
 *
 * The source is a string with variables; keys are matched in nginx's
 * order: exact strings (case-insensitive), then with `hostnames` the
 * longest `*.example.com` / `.example.com` wildcard, then `example.*`, then
 * `~` / `~*` regexes in the order written (their captures usable in the
 * value). The value may contain variables; it is computed when the variable
 * is first read and cached for the request, unless the map is `volatile`.
 */
import type { ConfContext } from '../conf/context.ts';
import type { ConfNode } from '../conf/parser.ts';
import { compileHttpRegex, execRegex } from './regex.ts';
import type { HttpRegex } from './regex.ts';
import { compileComplex } from './variables.ts';
import type { ComplexValue, VariableHost, VariableRegistry } from './variables.ts';
/** A map's table; `R` is what its values are computed for (an http request, or a stream session). */
interface MapTable<R extends VariableHost> {
  source: ComplexValue<R>;
  hostnames: boolean;
  exact: Map<string, ComplexValue<R>>;
  /** `*.example.com` and `.example.com`, stored as the suffix after `*` (`.example.com`), longest first. */
  head: Array<{ suffix: string; value: ComplexValue<R>; dot: boolean }>;
  /** `example.*`, stored as `example.`, longest first. */
  tail: Array<{ prefix: string; value: ComplexValue<R> }>;
  regexes: Array<{ re: HttpRegex; value: ComplexValue<R> }>;
  defaultValue: ComplexValue<R> | undefined;
}

const EMPTY: ComplexValue<VariableHost> = { constant: '', source: '', evaluate: () => '' };

/** The value of the map for request `r` (ngx_http_map_variable + ngx_http_map_find). */
function lookup<R extends VariableHost>(r: R, map: MapTable<R>): string {
  let key = map.source.evaluate(r);
  if (map.hostnames && key.endsWith('.')) key = key.slice(0, -1);
  const value = find(r, map, key) ?? map.defaultValue ?? EMPTY;
  return value.constant ?? value.evaluate(r);
}

function find<R extends VariableHost>(r: R, map: MapTable<R>, key: string): ComplexValue<R> | undefined {
  const low = key.toLowerCase();
  const exact = map.exact.get(low);
  if (exact) return exact;
  if (map.hostnames) {
    for (const w of map.head) {
      if (low.endsWith(w.suffix) && (low.length > w.suffix.length)) return w.value;
      if (w.dot && low === w.suffix.slice(1)) return w.value;
    }
    for (const w of map.tail) {
      if (low.startsWith(w.prefix) && low.length > w.prefix.length) return w.value;
    }
  }
  // as nginx, an empty source never matches a regex
  if (key) for (const x of map.regexes) if (execRegex(r, x.re, key)) return x.value;
  return undefined;
}

/** Keys already used, as nginx's hash keys: a `.a.com` key takes both `a.com` and `*.a.com`. */
interface SeenKeys {
  exact: Set<string>;
  head: Set<string>;
  tail: Set<string>;
}

/** Files a `hostnames` key as exact, leading or trailing wildcard (nginx's ngx_hash_add_key). */
function addHostKey<R extends VariableHost>(cf: ConfContext, map: MapTable<R>, key: string, value: ComplexValue<R>, seen: SeenKeys): void {
  const low = key.toLowerCase();
  const conflict = () => cf.error(`conflicting parameter "${key}"`);
  const star = low.indexOf('*');
  if (low.startsWith('*.') && low.indexOf('*', 1) < 0) {
    const suffix = low.slice(1);
    if (seen.head.has(suffix)) throw conflict();
    seen.head.add(suffix);
    map.head.push({ suffix, value, dot: false });
  } else if (low.startsWith('.') && star < 0) {
    if (seen.head.has(low) || seen.exact.has(low.slice(1))) throw conflict();
    seen.head.add(low);
    seen.exact.add(low.slice(1));
    map.head.push({ suffix: low, value, dot: true });
  } else if (low.endsWith('.*') && star === low.length - 1) {
    const prefix = low.slice(0, -1);
    if (seen.tail.has(prefix)) throw conflict();
    seen.tail.add(prefix);
    map.tail.push({ prefix, value });
  } else if (star >= 0) {
    throw cf.error(`invalid hostname or wildcard "${key}"`);
  } else {
    const name = low.endsWith('.') ? low.slice(0, -1) : low;
    if (seen.exact.has(name)) throw conflict();
    seen.exact.add(name);
    map.exact.set(name, value);
  }
}

/** Reads a `map` block into a variable of `vars` (the http or the stream block's). */
export function readMap<R extends VariableHost>(cf: ConfContext, node: ConfNode, vars: VariableRegistry<R>): void {
  const [sourceText, target] = node.args;
  const map: MapTable<R> = {
    source: compileComplex(cf, vars, sourceText),
    hostnames: false, exact: new Map(), head: [], tail: [], regexes: [], defaultValue: undefined,
  };
  if (!target.startsWith('$')) throw cf.error(`invalid variable name "${target}"`);
  const name = target.slice(1);
  const existing = vars.lookup(name);
  if (existing && !existing.prefix && !existing.changeable && !existing.set) throw cf.error(`the duplicate "${name}" variable`);

  let volatile = false;
  const seen: SeenKeys = { exact: new Set(), head: new Set(), tail: new Set() };
  for (const entry of node.children ?? []) {
    const at = (msg: string) => {
      const saved = cf.node;
      cf.node = entry;
      const err = cf.error(msg);
      cf.node = saved;
      return err;
    };
    if (entry.children) throw at('unexpected "{"');
    if (entry.args.length === 0 && entry.name === 'hostnames') { map.hostnames = true; continue; }
    if (entry.args.length === 0 && entry.name === 'volatile') { volatile = true; continue; }
    if (entry.args.length !== 1) throw at('invalid number of the map parameters');
    const saved = cf.node;
    cf.node = entry;
    try {
      const value = compileComplex(cf, vars, entry.args[0]);
      let key = entry.name;
      if (key === 'default') {
        if (map.defaultValue) throw cf.error('duplicate default map parameter');
        map.defaultValue = value;
        continue;
      }
      if (key.startsWith('~')) {
        const caseless = key[1] === '*';
        map.regexes.push({ re: compileHttpRegex(cf, vars, key.slice(caseless ? 2 : 1), caseless), value });
        continue;
      }
      if (key.startsWith('\\')) key = key.slice(1);
      if (map.hostnames) addHostKey(cf, map, key, value, seen);
      else {
        const low = key.toLowerCase();
        if (seen.exact.has(low)) throw cf.error(`conflicting parameter "${key}"`);
        seen.exact.add(low);
        map.exact.set(low, value);
      }
    } finally {
      cf.node = saved;
    }
  }
  // the longest wildcard wins
  map.head.sort((a, b) => b.suffix.length - a.suffix.length);
  map.tail.sort((a, b) => b.prefix.length - a.prefix.length);
  vars.define({ name, get: (r) => lookup(r, map), changeable: true, noCache: volatile });
}

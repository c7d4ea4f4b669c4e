/**
 * Location selection, as ngx_http_core_find_location does it: an exact `=`
 * match wins at once; otherwise the longest matching prefix (whose nested
 * locations are searched next), unless a proxy-like location named `uri/`
 * asks for the `/dir` → `/dir/` redirect; then, unless the prefix was `^~`,
 * the regex locations in the order written. Each level's table is built once
 * (at configuration time, or on first use for locations built at run time).
 */
import type { LocationConf } from './http-conf.ts';
import { applyMatch } from './regex.ts';
import type { HttpRequest } from './request.ts';

/** One level's locations (a server's, or a location's nested ones), indexed. */
interface LevelTable {
  exact: Map<string, LocationConf>;
  /** Prefix and `^~` locations by path. */
  prefix: Map<string, LocationConf>;
  /** Distinct prefix lengths, longest first: a lookup tries each. */
  lengths: number[];
  regexes: LocationConf[];
  /** Locations asking for the auto redirect, by their path without the trailing `/`. */
  autoRedirect: Map<string, LocationConf>;
}

const tables = new WeakMap<LocationConf[], LevelTable>();

function build(list: LocationConf[]): LevelTable {
  const t: LevelTable = { exact: new Map(), prefix: new Map(), lengths: [], regexes: [], autoRedirect: new Map() };
  for (const l of list) {
    if (l.match === 'exact') t.exact.set(l.path, l);
    else if (l.match === 'prefix' || l.match === 'prefix-stop') t.prefix.set(l.path, l);
    else if (l.match === 'regex') t.regexes.push(l);
    else continue;
    if (l.autoRedirect && l.path.endsWith('/')) {
      const key = l.path.slice(0, -1);
      // an exact location's configuration is used when both ask (nginx's tree node)
      if (l.match === 'exact' || !t.autoRedirect.has(key)) t.autoRedirect.set(key, l);
    }
  }
  t.lengths = [...new Set([...t.prefix.keys()].map((p) => p.length))].sort((a, b) => b - a);
  return t;
}

function tableOf(list: LocationConf[]): LevelTable {
  let t = tables.get(list);
  if (!t) {
    t = build(list);
    tables.set(list, t);
  }
  return t;
}

/** Builds the tables of a server's locations and all nested ones (done at configuration time). */
export function indexLocations(list: LocationConf[]): void {
  tables.set(list, build(list));
  for (const l of list) if (l.children.length) indexLocations(l.children);
}

/** After changing a location list at run time (gateway routes), its table is rebuilt on next use. */
export function invalidateLocations(list: LocationConf[]): void {
  tables.delete(list);
}

export interface LocationFound {
  loc: LocationConf;
  /** nginx's NGX_DONE: answer 301 to `loc`'s name with a slash. */
  autoRedirect: boolean;
}

const FOUND = 0;
const AGAIN = 1;
const NONE = 2;
const REDIRECT = 3;
type Rc = typeof FOUND | typeof AGAIN | typeof NONE | typeof REDIRECT;

/**
 * Finds the location for `uri` among a server's `locations`; `fallback` (the
 * server's own level) when none matches. Regex matches set r.captures and
 * named-group variables.
 */
export function findLocation(r: HttpRequest, locations: LocationConf[], uri: string, fallback: LocationConf): LocationFound {
  const out: LocationFound = { loc: fallback, autoRedirect: false };
  if (find(r, locations, uri, out) === REDIRECT) out.autoRedirect = true;
  return out;
}

function find(r: HttpRequest, list: LocationConf[], uri: string, out: LocationFound): Rc {
  if (list.length === 0) return NONE;
  const t = tableOf(list);
  const exact = t.exact.get(uri);
  if (exact) {
    out.loc = exact;
    return FOUND;
  }
  let rc: Rc = NONE;
  let noregex = false;
  let best: LocationConf | undefined;
  for (const len of t.lengths) {
    if (len > uri.length) continue;
    best = t.prefix.get(len === uri.length ? uri : uri.slice(0, len));
    if (best) break;
  }
  // a prefix as long as the URI beats the auto redirect; a shorter one does not
  if (!(best && best.path.length === uri.length) && t.autoRedirect.size) {
    const auto = t.autoRedirect.get(uri);
    if (auto) {
      out.loc = auto;
      return REDIRECT;
    }
  }
  if (best) {
    out.loc = best;
    noregex = best.match === 'prefix-stop';
    rc = AGAIN;
    if (best.children.length) {
      const nested = find(r, best.children, uri, out);
      if (nested === FOUND || nested === REDIRECT) return nested;
    }
  }
  if (!noregex) {
    for (const l of t.regexes) {
      const m = l.regex!.exec(uri);
      if (!m) continue;
      applyMatch(r, m, l.regexNames);
      out.loc = l;
      // nginx ignores an auto redirect found under a regex location
      if (l.children.length) find(r, l.children, uri, out);
      return FOUND;
    }
  }
  return rc;
}

/** nginx's rules for where a location may be written; returns an error message or undefined. */
export function checkNesting(parent: LocationConf | undefined, child: LocationConf): string | undefined {
  if (!parent) return undefined;
  if (parent.match === 'exact') return `location "${child.name}" cannot be inside the exact location "${parent.name}"`;
  if (parent.match === 'named') return `location "${child.name}" cannot be inside the named location "${parent.name}"`;
  if (child.match === 'named') return `named location "${child.name}" can be on the server level only`;
  // nginx compares with the parent's name as written, even a regex's
  if (child.match !== 'regex' && !child.path.startsWith(parent.name)) {
    return `location "${child.name}" is outside location "${parent.name}"`;
  }
  return undefined;
}

/**
 * Makes `loc` the request's location (ngx_http_update_location_config): a
 * method that `limit_except` does not allow gets the limit_except block
 * instead (its access rules, its proxy_pass), as nginx does.
 */
export function enterLocation(r: HttpRequest, loc: LocationConf): void {
  r.setLocation(loc);
  const lmt = loc.limitExcept;
  if (lmt && !lmt.methods.has(r.method)) enterAnonymous(r, lmt.loc);
}

/** Moves to an `if` or `limit_except` block: its level, and its content handler if it has one. */
export function enterAnonymous(r: HttpRequest, loc: LocationConf): void {
  const handler = r.contentHandler;
  r.setLocation(loc);
  if (!loc.contentHandler) r.contentHandler = handler;
}

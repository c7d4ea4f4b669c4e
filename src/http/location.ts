/**
 * Location selection, as ngx_http_core_find_location does it: the longest
 * matching prefix (an exact `=` match wins at once, `^~` forbids regexes),
 * then nested locations, then regex locations in the order written.
 */
import type { LocationConf } from './http-conf.ts';

export interface LocationMatchResult {
  loc: LocationConf;
  /** Captures of the regex location that matched ($1..$9 and named). */
  captures?: string[];
  groups?: Record<string, string | undefined>;
}

/** Static (exact and prefix) and regex locations of one level, as nginx keeps them. */
interface LevelIndex {
  statics: LocationConf[];
  regexes: LocationConf[];
}

const indexCache = new WeakMap<LocationConf[], LevelIndex>();

function indexOf(list: LocationConf[]): LevelIndex {
  let ix = indexCache.get(list);
  if (!ix) {
    ix = {
      statics: list.filter((l) => l.match === 'exact' || l.match === 'prefix' || l.match === 'prefix-stop'),
      regexes: list.filter((l) => l.match === 'regex'),
    };
    indexCache.set(list, ix);
  }
  return ix;
}

/** ngx_http_core_find_location's results: matched for good, prefix found (look further), nothing. */
const FOUND = 0;
const AGAIN = 1;
const NONE = 2;
type Rc = typeof FOUND | typeof AGAIN | typeof NONE;

/** Finds the location for `uri` among `locations` (a server's or a location's children). */
export function selectLocation(locations: LocationConf[], uri: string, fallback: LocationConf): LocationMatchResult {
  const out: LocationMatchResult = { loc: fallback };
  find(locations, uri, out);
  return out;
}

function find(list: LocationConf[], uri: string, out: LocationMatchResult): Rc {
  const ix = indexOf(list);
  let rc: Rc = NONE;
  let noregex = false;
  let best: LocationConf | undefined;
  for (const l of ix.statics) {
    if (l.match === 'exact') {
      if (uri === l.path) {
        out.loc = l;
        return FOUND;
      }
      continue;
    }
    if (uri.startsWith(l.path) && (!best || l.path.length > best.path.length)) best = l;
  }
  if (best) {
    out.loc = best;
    noregex = best.match === 'prefix-stop';
    rc = AGAIN;
    if (best.children.length) {
      const nested = find(best.children, uri, out);
      if (nested === FOUND) return nested;
    }
  }
  if (!noregex) {
    for (const l of ix.regexes) {
      const m = l.regex!.exec(uri);
      if (!m) continue;
      out.loc = l;
      out.captures = Array.from(m, (s) => s ?? '');
      out.groups = m.groups;
      if (l.children.length) find(l.children, uri, out);
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
  if ((child.match === 'prefix' || child.match === 'prefix-stop' || child.match === 'exact')
    && (parent.match === 'prefix' || parent.match === 'prefix-stop')
    && !child.path.startsWith(parent.path)) {
    return `location "${child.name}" is outside location "${parent.name}"`;
  }
  return undefined;
}

/**
 * Paths as lua-resty-radixtree matches them: a path without `*` is exact
 * (`/hello` is not `/hello/`); one with `*` is a prefix, the part before
 * the first `*` (`/foo/*` matches `/foo/` and `/foo/a`, not `/foo`). Exact
 * candidates come first, then prefixes from the longest matching one down;
 * a longer prefix beats a shorter one whatever the priorities. Within one
 * path, candidates go by priority (higher first), then the longer path as
 * written, then the order they were added.
 *
 * A lookup costs one map probe per distinct prefix length up to the
 * request path's, whatever the number of routes.
 */

export interface PathEntry {
  priority: number;
  /** The path as written (`/foo/*`): ties in priority go to the longer. */
  written: string;
  /** Insertion order: the last tie-breaker. */
  order: number;
}

function byPrecedence(a: PathEntry, b: PathEntry): number {
  return b.priority - a.priority || b.written.length - a.written.length || a.order - b.order;
}

export class UriRouter<E extends PathEntry> {
  private readonly exact = new Map<string, E[]>();
  private readonly prefix = new Map<string, E[]>();
  /** The lengths prefixes have, longest first: a lookup probes only these. */
  private prefixLengths: number[] = [];
  size = 0;

  add(path: string, entry: E): void {
    const star = path.indexOf('*');
    const map = star < 0 ? this.exact : this.prefix;
    const key = star < 0 ? path : path.slice(0, star);
    if (star >= 0 && !this.prefixLengths.includes(key.length)) {
      this.prefixLengths.push(key.length);
      this.prefixLengths.sort((a, b) => b - a);
    }
    let list = map.get(key);
    if (!list) map.set(key, (list = []));
    list.push(entry);
    list.sort(byPrecedence);
    this.size++;
  }

  /** The first candidate for `path` that `accept` takes, in radixtree's order. */
  match(path: string, accept: (e: E) => boolean): E | undefined {
    const exact = this.exact.get(path);
    if (exact) for (const e of exact) if (accept(e)) return e;
    for (const len of this.prefixLengths) {
      if (len > path.length) continue;
      const list = this.prefix.get(len === path.length ? path : path.slice(0, len));
      if (list) for (const e of list) if (accept(e)) return e;
    }
    return undefined;
  }
}

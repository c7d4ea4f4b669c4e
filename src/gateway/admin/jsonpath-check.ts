/**
 * Whether a `post_arg.<path>` of a route's `vars` is a JSONPath the data
 * plane's jsonpath library can parse, with that library's message when not
 * (`invalid expression "$.a[" near "["`): APISIX checks these on write.
 * A recogniser of the grammar's paths (`.name`, `..name`, `[*]`, unions,
 * slices); filter and script subscripts are taken as balanced parentheses.
 */
const WS = /[ \t\n]*/y;

function ws(s: string, i: number): number { WS.lastIndex = i; WS.exec(s); return WS.lastIndex; }

function token(s: string, i: number, re: RegExp): number {
  const y = new RegExp(re.source, 'y');
  y.lastIndex = i;
  return y.exec(s) ? ws(s, y.lastIndex) : -1;
}

const INDEX = /[+-]?\d+/;
const NAME = /[A-Za-z_][A-Za-z0-9_]*/;
const STRING = /'(?:\\.|[^\\'])*'|"(?:\\.|[^\\"])*"/;

function childName(s: string, i: number): number {
  for (const re of [INDEX, NAME]) { const j = token(s, i, re); if (j >= 0) return j; }
  return s[i] === '*' ? i + 1 : -1;
}

function parens(s: string, i: number): number {
  if (s[i] !== '(') return -1;
  let depth = 0;
  for (let j = i; j < s.length; j++) {
    const c = s[j];
    if (c === "'" || c === '"') { const k = token(s, j, STRING); if (k < 0) return -1; j = k - 1; continue; }
    if (c === '(') depth++;
    else if (c === ')' && --depth === 0) return ws(s, j + 1);
  }
  return -1;
}

function slice(s: string, i: number): number {
  let j = token(s, i, INDEX);
  if (j < 0) j = i;
  j = token(s, j, /:/);
  if (j < 0) return -1;
  const k = token(s, j, INDEX);
  if (k >= 0) j = k;
  const c = token(s, j, /:/);
  if (c >= 0) { const e = token(s, c, INDEX); if (e >= 0) j = e; }
  return j;
}

function unionItem(s: string, i: number): number {
  for (const f of [slice, (t: string, k: number) => token(t, k, STRING), (t: string, k: number) => token(t, k, INDEX)]) {
    const j = f(s, i);
    if (j >= 0) return j;
  }
  return -1;
}

function subscriptExpr(s: string, i: number): number {
  if (s[i] === '*') return i + 1;
  let j = unionItem(s, i);
  if (j >= 0) {
    for (;;) {
      const c = token(s, j, /,/);
      const k = c >= 0 ? unionItem(s, c) : -1;
      if (k < 0) return j;
      j = k;
    }
  }
  j = parens(s, i);
  if (j >= 0) return j;
  j = slice(s, i);
  if (j >= 0) return j;
  return s[i] === '?' ? parens(s, ws(s, i + 1)) : -1;
}

function subscript(s: string, i: number): number {
  if (s[i] !== '[') return -1;
  const j = subscriptExpr(s, i + 1);
  return j >= 0 && s[j] === ']' ? j + 1 : -1;
}

function childN(s: string, i: number): number {
  if (s.startsWith('..', i)) { const j = childName(s, i + 2); if (j >= 0) return j; }
  if (s[i] === '.') { const j = childName(s, i + 1); if (j >= 0) return j; }
  if (s.startsWith('..', i)) { const j = subscript(s, i + 2); if (j >= 0) return j; }
  return subscript(s, i);
}

/** The library's error for a JSONPath, or undefined when it parses. */
export function jsonPathError(expr: string): string | undefined {
  let i = ws(expr, 0);
  let j = -1;
  if (expr[i] === '$') {
    if (expr.startsWith('..', i + 1)) j = childName(expr, i + 3);
    if (j < 0 && expr[i + 1] === '.') j = childName(expr, i + 2);
    if (j < 0) j = subscript(expr, i + 1);
    if (j < 0) j = i + 1;
  } else {
    j = subscript(expr, i);
    if (j < 0) j = childName(expr, i);
  }
  if (j < 0) return `invalid expression "${expr}"`;
  i = j;
  for (;;) { const k = childN(expr, i); if (k < 0) break; i = k; }
  i = ws(expr, i);
  return i === expr.length ? undefined : `invalid expression "${expr}" near "${expr.slice(i)}"`;
}

/** The first `post_arg.` path of a vars tree the library refuses (APISIX's validate_post_arg). */
export function checkPostArgs(node: unknown): string | undefined {
  if (!Array.isArray(node)) return undefined;
  if (node.length >= 3 && typeof node[0] === 'string' && node[0].startsWith('post_arg.')) {
    return jsonPathError(`$.${node[0].slice(9)}`);
  }
  for (const child of node) {
    const err = checkPostArgs(child);
    if (err) return err;
  }
  return undefined;
}

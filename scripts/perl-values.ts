/**
 * The few Perl values APISIX's .t files write after `--- SECTION eval`:
 * strings ("..." with \n-style escapes, '...'), qr/.../ and qr{...},
 * numbers, `.` concatenation, `x N` repetition and [...] / (...) lists.
 * Anything else (variables, function calls, heredocs) is not evaluable:
 * undefined.
 */
export type PerlValue = string | number | RegExp | PerlValue[];

/** The (...) lists read: Perl flattens them into the list around them, not [...] ones. */
const parenLists = new WeakSet<PerlValue[]>();

const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', '0': '\0', e: '\x1b' };

class Reader {
  i = 0;
  readonly src: string;
  constructor(src: string) { this.src = src; }
  ws(): void {
    for (;;) {
      while (this.i < this.src.length && /\s/.test(this.src[this.i])) this.i++;
      if (this.src[this.i] !== '#') return;
      while (this.i < this.src.length && this.src[this.i] !== '\n') this.i++;
    }
  }
  peek(s: string): boolean { this.ws(); return this.src.startsWith(s, this.i); }
  eat(s: string): boolean { if (!this.peek(s)) return false; this.i += s.length; return true; }
}

/** A string from r.i (its opening delimiter) to `close`; `q` says which quoting: '"' (escapes, no variables) or "'". */
function quoted(r: Reader, q: string, close = q): string | undefined {
  let s = '';
  for (let j = r.i + 1; j < r.src.length; j++) {
    const c = r.src[j];
    if (c === '\\') {
      const n = r.src[++j];
      if (q === "'") s += n === close || n === '\\' ? n : `\\${n}`;
      else if (n === 'x' && r.src[j + 1] === '{') { const e = r.src.indexOf('}', j); s += String.fromCodePoint(parseInt(r.src.slice(j + 2, e), 16)); j = e; }
      else if (n === 'x') { s += String.fromCharCode(parseInt(r.src.slice(j + 1, j + 3), 16)); j += 2; }
      else s += ESCAPES[n] ?? n;
      continue;
    }
    if (c === close) { r.i = j + 1; return s; }
    // an interpolated variable is beyond this reader ($ServerPort stays text: the caller renames it)
    if (q === '"' && (c === '$' || c === '@') && /[A-Za-z_{]/.test(r.src[j + 1] ?? '') && !r.src.startsWith('$ServerPort', j)) return undefined;
    s += c;
  }
  return undefined;
}

function regex(r: Reader): RegExp | undefined {
  const open = r.src[r.i + 2];
  const close = open === '{' ? '}' : open === '(' ? ')' : open === '[' ? ']' : open;
  let depth = 0, j = r.i + 3, body = '';
  for (; j < r.src.length; j++) {
    const c = r.src[j];
    if (c === '\\') { body += c + r.src[++j]; continue; }
    if (c === open && close !== open) depth++;
    else if (c === close) { if (depth === 0) break; depth--; }
    body += c;
  }
  if (j >= r.src.length) return undefined;
  const flags = /^[a-z]*/.exec(r.src.slice(j + 1))![0];
  r.i = j + 1 + flags.length;
  // Perl's \z (end of string), \A and the x flag's free spacing
  let src = body.replace(/\\z/g, '$(?![\\s\\S])').replace(/\\A/g, '^');
  if (flags.includes('x')) src = src.replace(/\\#/g, '\u0000').replace(/#[^\n]*/g, '').replace(/\s+/g, '').replace(/\u0000/g, '\\#');
  try { return new RegExp(src, (flags.includes('s') ? 's' : '') + (flags.includes('m') ? 'm' : '') + (flags.includes('i') ? 'i' : '')); } catch { return undefined; }
}

function primary(r: Reader): PerlValue | undefined {
  r.ws();
  const c = r.src[r.i];
  if (c === '"' || c === "'") return quoted(r, c);
  // qq{...} and q{...} (one level: no nested braces)
  const qq = /^(qq|q)([{(\[<\/|!])/.exec(r.src.slice(r.i));
  if (qq) {
    const close = ({ '{': '}', '(': ')', '[': ']', '<': '>' } as Record<string, string>)[qq[2]] ?? qq[2];
    r.i += qq[1].length;
    return quoted(r, qq[1] === 'qq' ? '"' : "'", close);
  }
  if (r.src.startsWith('qr', r.i) && /[/{(\[!|#]/.test(r.src[r.i + 2] ?? '')) return regex(r);
  const num = /^-?\d+(\.\d+)?/.exec(r.src.slice(r.i));
  if (num) { r.i += num[0].length; return Number(num[0]); }
  if (c === '[' || c === '(') {
    r.i++;
    const end = c === '[' ? ']' : ')';
    const items: PerlValue[] = [];
    while (!r.eat(end)) {
      const v = expr(r);
      if (v === undefined) return undefined;
      // a (...) list inside a list is flattened, as Perl does
      if (Array.isArray(v) && parenLists.has(v)) items.push(...v); else items.push(v);
      if (!r.eat(',') && !r.peek(end)) return undefined;
    }
    if (c === '(') parenLists.add(items);
    return items;
  }
  return undefined;
}

function expr(r: Reader): PerlValue | undefined {
  let v = primary(r);
  for (;;) {
    if (v === undefined) return undefined;
    r.ws();
    const rep = /^x\s*(\d+)/.exec(r.src.slice(r.i));
    if (rep) {
      r.i += rep[0].length;
      const n = Number(rep[1]);
      if (Array.isArray(v)) {
        const one = v;
        v = Array.from({ length: n }, () => one).flat();
        if (parenLists.has(one)) parenLists.add(v);
      }
      else if (typeof v === 'string') v = v.repeat(n);
      else return undefined;
      continue;
    }
    if (r.src[r.i] === '.' && r.src[r.i + 1] !== '.') {
      r.i++;
      const w = primary(r);
      if (typeof v !== 'string' && typeof v !== 'number') return undefined;
      if (typeof w !== 'string' && typeof w !== 'number') return undefined;
      v = String(v) + String(w);
      continue;
    }
    return v;
  }
}

/** The value of a whole `eval` section, or undefined when it is more than this reader knows. */
export function perlValue(src: string): PerlValue | undefined {
  const r = new Reader(src);
  const v = expr(r);
  r.ws();
  return r.i >= src.length || src.slice(r.i).trim() === ';' ? v : undefined;
}

/**
 * PCRE patterns (as OpenResty's ngx.re compiles them, PCRE 8.x) translated to JavaScript RegExp
 * source, so that matching a latin1 view of the bytes gives PCRE's answers with byte offsets.
 *
 * Every PCRE capture becomes a JS named group `_N` (N = PCRE's number), so groups added by the
 * translation (atomic groups, possessive quantifiers) never shift the numbering; results are read
 * by name. What differs between the engines is rewritten:
 *   `.` matches anything but \n (JS also stops at \r)   `$` is end or before a final \n
 *   `^`/`$` in multiline mode see only \n               `\s` is [\t\n\v\f\r ] (JS adds NBSP…)
 *   `\A \z \Z \h \H \v \V \R \N \e \a \Q…\E \x{…} \o{…} \g{…} \k{…} (?P<n>) (?P=n) (?'n')`
 *   POSIX classes, `(?i)` inline (ES modifiers), the x flag, atomic groups and possessive
 *   quantifiers (lookahead + backreference).
 * What has no translation is refused with PCRE-style wording: `\K`, `\G` (but at the very start with no
 * alternation, which compile() in re.ts turns into the `a` option), recursion, conditionals,
 * branch reset, callouts, verbs, `\p`/`\X`/`\C`, negated POSIX classes.
 */

export interface PcreOptions {
  readonly caseless: boolean;
  readonly multiline: boolean;
  readonly dotall: boolean;
  readonly extended: boolean;
  /** The pattern and subject are UTF-8 (the u/U options): the pattern arrives decoded. */
  readonly utf8: boolean;
  /** Several groups may share a name (the D option; `(?J)` in the pattern does the same). */
  readonly dupnames: boolean;
  /** JavaScript compatibility (the J option): `\uHHHH` is a character, a lone `\u` or `\U` a letter. */
  readonly javascript: boolean;
}

export interface TranslatedPattern {
  readonly source: string;
  /** PCRE's capture count. */
  readonly captures: number;
  /** Each name with the PCRE groups that carry it, in order. */
  readonly names: ReadonlyMap<string, readonly number[]>;
}

/** Why a pattern does not compile; `offset` is where in it PCRE points (its `at "…"`), when we know. */
export class PcreError extends Error {
  readonly offset: number | undefined;
  constructor(message: string, offset?: number) {
    super(message);
    this.offset = offset;
  }
}

interface Frame {
  i: boolean;
  m: boolean;
  s: boolean;
  x: boolean;
  /** Modifier groups `(?i:` opened by an inline `(?i)` in this group: closed at `|` and at the end. */
  reopen: string;
  readonly closer: string;
  readonly start: number;
}

const SPACE = '\\t\\n\\x0b\\f\\r ';
const POSIX: Record<string, string> = {
  alpha: 'A-Za-z', digit: '0-9', alnum: 'A-Za-z0-9', upper: 'A-Z', lower: 'a-z', space: SPACE,
  blank: '\\t ', punct: '!-\\/:-@\\[-`{-~', xdigit: '0-9A-Fa-f', word: 'A-Za-z0-9_',
  cntrl: '\\x00-\\x1f\\x7f', graph: '!-~', print: ' -~', ascii: '\\x00-\\x7f',
};
const ESCAPE_CLASS: Record<string, string> = {
  s: `[${SPACE}]`, S: `[^${SPACE}]`, h: '[\\t \\xa0]', H: '[^\\t \\xa0]',
  v: '[\\n\\x0b\\f\\r\\x85]', V: '[^\\n\\x0b\\f\\r\\x85]', N: '[^\\n]',
  d: '\\d', D: '\\D', w: '\\w', W: '\\W',
};
const IN_CLASS: Record<string, string> = { s: SPACE, h: '\\t \\xa0', v: '\\n\\x0b\\f\\r\\x85', d: '\\d', D: '\\D', w: '\\w', W: '\\W', S: '\\S' };
const SIMPLE: Record<string, number> = { n: 10, r: 13, t: 9, f: 12, e: 27, a: 7 };
const UNSUPPORTED: Record<string, string> = {
  K: '\\K (reset match start)', G: '\\G (match at the previous end)', p: '\\p (Unicode properties)', P: '\\P (Unicode properties)',
  X: '\\X (extended grapheme)', C: '\\C (single byte in UTF-8 mode)',
};
/** Perl's case-changing escapes, which PCRE refuses (`\N` is refused only as `\N{name}`). */
const PERL_ONLY = 'PCRE does not support \\L, \\l, \\N{name}, \\U, or \\u';

/** A literal character as JS source (escaped when it means something, \xHH outside printable ASCII). */
function literal(ch: string): string {
  const code = ch.codePointAt(0)!;
  if ('^$\\.*+?()[]{}|/'.includes(ch)) return '\\' + ch;
  if (ch === '-') return '\\x2d'; // also inside a class, where a bare `-` could make a range
  if (code < 0x20 || (code >= 0x7f && code <= 0xff)) return '\\x' + code.toString(16).padStart(2, '0');
  if (code > 0xff) return `\\u{${code.toString(16)}}`;
  return ch;
}

/** Counts PCRE's capturing groups and their names (forward references need them); a name used twice needs `dupnames`. */
function scanGroups(p: string, dupnames: boolean): { count: number; names: Map<string, number[]> } {
  const duplicatesAllowed = dupnames || /\(\?[imsxUX-]*J/.test(p);
  let count = 0;
  const names = new Map<string, number[]>();
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === '\\') { if (p[i + 1] === 'Q') { const end = p.indexOf('\\E', i + 2); i = end < 0 ? p.length : end + 1; } else i++; continue; }
    if (c === '[') { i = classEnd(p, i); continue; }
    if (c !== '(') continue;
    if (p[i + 1] !== '?' && p[i + 1] !== '*') { count++; continue; }
    const named = /^\(\?(?:P?<(?![=!])|')([A-Za-z_]\w*)/.exec(p.slice(i, i + 40));
    if (named) {
      count++;
      const seen = names.get(named[1]!);
      // PCRE points just past the second name
      if (seen && !duplicatesAllowed) throw new PcreError('two named subpatterns have the same name', i + named[0].length);
      names.set(named[1]!, [...(seen ?? []), count]);
    }
  }
  return { count, names };
}

/** Index of the `]` closing the class that opens at `start`. */
function classEnd(p: string, start: number): number {
  let i = start + 1;
  if (p[i] === '^') i++;
  if (p[i] === ']') i++;
  for (; i < p.length; i++) {
    if (p[i] === '\\') { i++; continue; }
    if (p[i] === '[' && p[i + 1] === ':') { const end = p.indexOf(':]', i + 2); if (end > 0) { i = end + 1; continue; } }
    if (p[i] === ']') return i;
  }
  throw new PcreError('missing terminating ] for character class');
}

export function translatePcre(pattern: string, options: PcreOptions): TranslatedPattern {
  const { count, names } = scanGroups(pattern, options.dupnames);
  const p = pattern;
  let out = '';
  let i = 0;
  let group = 0;
  let synthetic = 0;
  let atom = -1; // where the last quantifiable item starts in `out`
  const frames: Frame[] = [{ i: options.caseless, m: options.multiline, s: options.dotall, x: options.extended, reopen: '', closer: '', start: 0 }];
  const frame = () => frames[frames.length - 1]!;

  const codeEscape = (code: number): string => {
    if (code > 0xff && !options.utf8) throw new PcreError('character value in \\x{} or \\o{} is too large');
    return code > 0xff ? `\\u{${code.toString(16)}}` : '\\x' + code.toString(16).padStart(2, '0');
  };
  const backref = (n: number) => {
    if (n < 1 || n > count) throw new PcreError('reference to non-existent subpattern');
    return `\\k<_${n}>`;
  };
  const namedRef = (name: string) => {
    const groups = names.get(name);
    if (!groups) throw new PcreError('reference to non-existent subpattern');
    return groups.length === 1 ? `\\k<_${groups[0]}>` : `(?:${groups.map((g) => `\\k<_${g}>`).join('|')})`;
  };
  /** An escape at p[i] = '\\' (outside or inside a class): its JS source and where it ends. */
  const escape = (inClass: boolean): string => {
    const c = p[i + 1];
    if (c === undefined) throw new PcreError('\\ at end of pattern');
    i += 2;
    if (c in SIMPLE) return codeEscape(SIMPLE[c]!);
    if (c === 'x' || c === 'o') {
      const braced = p[i] === '{' ? /^\{([0-9a-fA-F]*)\}/.exec(p.slice(i)) : null;
      if (braced) { i += braced[0].length; return codeEscape(parseInt(braced[1] || '0', c === 'x' ? 16 : 8)); }
      if (c === 'o') throw new PcreError('missing opening brace after \\o');
      const hex = /^[0-9a-fA-F]{0,2}/.exec(p.slice(i))![0];
      i += hex.length;
      return codeEscape(parseInt(hex || '0', 16));
    }
    if (c === 'u' && options.javascript) {
      const hex = /^[0-9a-fA-F]{4}/.exec(p.slice(i))?.[0];
      if (!hex) return 'u';
      i += 4;
      const code = parseInt(hex, 16);
      if (code > 0xff && !options.utf8) throw new PcreError('character value in \\u.... sequence is too large', i - 1);
      return codeEscape(code);
    }
    if (c === 'U' && options.javascript) return 'U';
    if ('LlUu'.includes(c) || (c === 'N' && p[i] === '{')) throw new PcreError(PERL_ONLY, i - 1);
    if (c === 'E') return ''; // a stray \E means nothing
    if (c === 'c') { const ch = p[i++]; if (!ch) throw new PcreError('\\c at end of pattern'); return codeEscape(ch.toUpperCase().charCodeAt(0) ^ 0x40); }
    if (c === 'Q') {
      const end = p.indexOf('\\E', i);
      const text = p.slice(i, end < 0 ? p.length : end);
      i = end < 0 ? p.length : end + 2;
      return [...text].map(literal).join('');
    }
    if (inClass) {
      if (c === 'b') return '\\x08';
      if (c in IN_CLASS) return IN_CLASS[c]!;
    } else {
      if (c in ESCAPE_CLASS) return ESCAPE_CLASS[c]!;
      if (c === 'b' || c === 'B') return '\\' + c;
      if (c === 'A') return '(?<![\\s\\S])';
      if (c === 'z') return '(?![\\s\\S])';
      if (c === 'Z') return '(?=\\n?(?![\\s\\S]))';
      if (c === 'R') return '(?:\\r\\n|[\\n\\x0b\\f\\r\\x85])';
      if (c === 'g' || c === 'k') {
        const m = /^(?:\{(-?\d+|[A-Za-z_]\w*)\}|<([A-Za-z_]\w*)>|'([A-Za-z_]\w*)'|(-?\d+))/.exec(p.slice(i));
        if (!m) throw new PcreError(`a numbered reference must not be zero`);
        i += m[0].length;
        const ref = m[1] ?? m[2] ?? m[3] ?? m[4]!;
        if (!/^-?\d+$/.test(ref)) return namedRef(ref);
        const n = Number(ref);
        return backref(n < 0 ? group + 1 + n : n);
      }
    }
    if (c >= '0' && c <= '9') {
      const digits = /^\d*/.exec(p.slice(i))![0];
      const n = Number(c + digits);
      if (!inClass && c !== '0' && (n < 10 || n <= count)) { i += digits.length; return backref(n); }
      // \0 takes up to two more octal digits; \1-\7 that is no back reference, up to three in all
      const octal = c === '0' ? /^[0-7]{0,2}/.exec(p.slice(i))![0] : /^[0-7]{1,3}/.exec(c + digits)?.[0];
      if (octal === undefined) throw new PcreError('reference to non-existent subpattern');
      if (c === '0') { i += octal.length; return codeEscape(parseInt('0' + octal, 8)); }
      i += octal.length - 1;
      return codeEscape(parseInt(octal, 8));
    }
    if (c in UNSUPPORTED) throw new PcreError(`${UNSUPPORTED[c]} is not supported by Gatehouse's regex engine`);
    return literal(c); // PCRE 8 without PCRE_EXTRA: any other escaped letter is itself
  };

  const characterClass = () => {
    const end = classEnd(p, i);
    let body = '';
    i++;
    let negated = false;
    if (p[i] === '^') { negated = true; i++; }
    if (p[i] === ']') { body += '\\]'; i++; }
    while (i < end) {
      const c = p[i]!;
      if (c === '\\') { body += escape(true); continue; }
      if (c === '[' && p[i + 1] === ':') {
        const m = /^\[:(\^?)([a-z]+):\]/.exec(p.slice(i));
        if (m) {
          if (m[1]) throw new PcreError('negated POSIX classes ([:^name:]) are not supported by Gatehouse\'s regex engine');
          const set = POSIX[m[2]!];
          if (!set) throw new PcreError('unknown POSIX class name');
          body += set;
          i += m[0].length;
          continue;
        }
      }
      body += c === '-' ? '-' : literal(c);
      i++;
    }
    i = end + 1;
    return `[${negated ? '^' : ''}${body}]`;
  };

  const inlineFlags = (spec: string, f: Frame): { on: string; off: string } => {
    let on = true;
    const changed = { on: '', off: '' };
    for (const ch of spec) {
      if (ch === '-') { on = false; continue; }
      if (ch === 'J') continue; // duplicate names: scanGroups has allowed them
      if (!'imsx'.includes(ch)) throw new PcreError(`inline option (?${ch}) is not supported by Gatehouse's regex engine`);
      f[ch as 'i' | 'm' | 's' | 'x'] = on;
      if (ch === 'i') changed[on ? 'on' : 'off'] = 'i';
    }
    return changed;
  };
  const modifier = (changed: { on: string; off: string }) => (changed.on || changed.off ? `(?${changed.on}${changed.off ? '-' + changed.off : ''}:` : '');

  const openGroup = () => {
    const f = frame();
    const start = out.length;
    const rest = p.slice(i, i + 48);
    const push = (open: string, closer = ')', flags?: Partial<Frame>) => {
      frames.push({ i: f.i, m: f.m, s: f.s, x: f.x, ...flags, reopen: '', closer, start });
      out += open;
      atom = -1;
    };
    if (rest.startsWith('(*')) throw new PcreError('(*VERB) and start-of-pattern options are not supported by Gatehouse\'s regex engine');
    if (!rest.startsWith('(?')) { i++; return push(`(?<_${++group}>`); }
    if (rest.startsWith('(?#')) { const end = p.indexOf(')', i); if (end < 0) throw new PcreError('missing ) after comment'); i = end + 1; return; }
    for (const look of ['(?=', '(?!', '(?<=', '(?<!']) if (rest.startsWith(look)) { i += look.length; return push(look); }
    if (rest.startsWith('(?:')) { i += 3; return push('(?:'); }
    if (rest.startsWith('(?>')) { i += 3; const name = `_a${++synthetic}`; return push(`(?:(?=(?<${name}>`, `))\\k<${name}>)`); }
    const named = /^\(\?(?:P?<([A-Za-z_]\w*)>|'([A-Za-z_]\w*)')/.exec(rest);
    if (named) { i += named[0].length; return push(`(?<_${++group}>`); }
    const pref = /^\(\?P=([A-Za-z_]\w*)\)/.exec(rest);
    if (pref) { i += pref[0].length; atom = out.length; out += namedRef(pref[1]!); return; }
    const flags = /^\(\?([imsxJUX-]*)([:)])/.exec(rest);
    if (flags) {
      i += flags[0].length;
      if (flags[2] === ':') {
        const inner: Frame = { ...f, reopen: '', closer: ')', start };
        const changed = inlineFlags(flags[1]!, inner);
        frames.push(inner);
        out += modifier(changed) || '(?:';
        atom = -1;
        return;
      }
      const open = modifier(inlineFlags(flags[1]!, f));
      if (open) { f.reopen += open; out += open; }
      return;
    }
    if (/^\(\?(?:R|[+-]?\d|&|P>)/.test(rest)) throw new PcreError('recursion and subroutine calls are not supported by Gatehouse\'s regex engine');
    if (rest.startsWith('(?|')) throw new PcreError('branch reset groups (?|…) are not supported by Gatehouse\'s regex engine');
    if (rest.startsWith('(?(')) throw new PcreError('conditional groups (?(…)…) are not supported by Gatehouse\'s regex engine');
    throw new PcreError('unrecognized character after (? or (?-');
  };

  while (i < p.length) {
    const f = frame();
    const c = p[i]!;
    if (f.x && /[\s]/.test(c)) { i++; continue; }
    if (f.x && c === '#') { const nl = p.indexOf('\n', i); i = nl < 0 ? p.length : nl + 1; continue; }
    const quantifier = /^(?:[*+?]|\{\d+(?:,\d*)?\})/.exec(p.slice(i, i + 24));
    if (quantifier) {
      if (atom < 0) throw new PcreError('nothing to repeat');
      i += quantifier[0].length;
      if (p[i] === '+') {
        i++;
        const name = `_a${++synthetic}`;
        out = `${out.slice(0, atom)}(?:(?=(?<${name}>${out.slice(atom)}${quantifier[0]}))\\k<${name}>)`;
      } else {
        out += quantifier[0];
        if (p[i] === '?') { out += '?'; i++; }
      }
      atom = -1;
      continue;
    }
    if (c === '(') { openGroup(); continue; }
    if (c === ')') {
      if (frames.length === 1) throw new PcreError('unmatched parentheses');
      const closed = frames.pop()!;
      out += ')'.repeat(closed.reopen.split('(?').length - 1) + closed.closer;
      atom = closed.start;
      i++;
      continue;
    }
    if (c === '|') {
      out += ')'.repeat(f.reopen.split('(?').length - 1) + '|' + f.reopen;
      atom = -1;
      i++;
      continue;
    }
    atom = out.length;
    if (c === '\\') out += escape(false);
    else if (c === '[') out += characterClass();
    else if (c === '.') { out += f.s ? '[\\s\\S]' : '[^\\n]'; i++; }
    else if (c === '^') { out += f.m ? '(?<![^\\n])' : '(?<![\\s\\S])'; i++; atom = -1; }
    else if (c === '$') { out += f.m ? '(?![^\\n])' : '(?=\\n?(?![\\s\\S]))'; i++; atom = -1; }
    else { out += literal(c); i++; }
  }
  if (frames.length > 1) throw new PcreError('missing )');
  out += ')'.repeat(frames[0]!.reopen.split('(?').length - 1);
  return { source: out, captures: count, names };
}

/**
 * nginx writes regular expressions for PCRE; JavaScript's RegExp is close.
 * This turns the PCRE spellings nginx configs use into JavaScript ones
 * (`(?P<name>`, `(?i)` at the start) and reports failures as nginx does.
 */
import type { ConfContext } from '../conf/context.ts';
import type { VariableHost, VariableRegistry } from './variables.ts';

export interface CompiledRegex {
  regex: RegExp;
  /** Number of capture groups ($1..$n). */
  captures: number;
  /** Named groups, usable as variables. */
  names: string[];
}

/** PCRE2's wording for JavaScript's regex syntax errors (nginx prints PCRE2's; the offset is not known here). */
const PCRE_MESSAGES: Array<[RegExp, string]> = [
  [/^Unterminated group$/, 'missing closing parenthesis'],
  [/^Unmatched '\)'$/, 'unmatched closing parenthesis'],
  [/^Nothing to repeat$/, 'quantifier does not follow a repeatable item'],
  [/^Unterminated character class$/, 'missing terminating ] for character class'],
  [/^Duplicate capture group name$/, 'two named subpatterns have the same name (PCRE2_DUPNAMES not set)'],
  [/^Invalid group$/, 'unrecognized character after (? or (?-'],
  [/^Range out of order in character class$/, 'range out of order in character class'],
  [/^Invalid capture group name$/, 'subpattern name expected'],
];

function pcreMessage(jsMessage: string): string {
  const text = jsMessage.replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, '');
  for (const [re, pcre] of PCRE_MESSAGES) if (re.test(text)) return pcre;
  return text;
}

export function compileRegex(cf: ConfContext | undefined, pattern: string, caseless = false): CompiledRegex {
  let src = pattern;
  let flags = caseless ? 'i' : '';
  // leading option settings: `(?i)`, and `(?-i)` to turn off a caseless default (valid_referers)
  const inline = /^\(\?([imsx]*)(?:-([imsx]+))?\)/.exec(src);
  if (inline && (inline[1] || inline[2])) {
    src = src.slice(inline[0].length);
    for (const f of inline[1]) if (f !== 'x' && !flags.includes(f)) flags += f;
    for (const f of inline[2] ?? '') flags = flags.replace(f, '');
  }
  src = src.replace(/\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>/g, '(?<$1>').replace(/\(\?P=([A-Za-z_]\w*)\)/g, '\\k<$1>');
  src = src.replace(/\(\?'([A-Za-z_]\w*)'/g, '(?<$1>');
  src = src.replace(/\\Z/g, '$').replace(/\\A/g, '^').replace(/\\z/g, '$');
  // PCRE's \Q...\E quotes a literal; \p{...} needs JavaScript's unicode mode
  src = src.replace(/\\Q(.*?)(?:\\E|$)/g, (_m, lit: string) => lit.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'));
  if (/\\[pP]\{/.test(src) && !flags.includes('u')) flags += 'u';
  let regex: RegExp;
  try {
    regex = new RegExp(src, flags);
  } catch (err) {
    const msg = `pcre2_compile() failed: ${pcreMessage((err as Error).message)} in "${pattern}"`;
    if (cf) throw cf.error(msg);
    throw new Error(msg);
  }
  const captures = new RegExp(`${regex.source}|`, flags).exec('')!.length - 1;
  const names = [...src.matchAll(/\(\?<([A-Za-z_][A-Za-z0-9_]*)>/g)].map((m) => m[1]);
  return { regex, captures, names };
}

/** A regex of the http configuration: its named groups are variables ($name), as in nginx. */
export interface HttpRegex extends CompiledRegex {
  /** The pattern as written, for log lines. */
  pattern: string;
  /** Variable index of each named group, in group order. */
  namedIndexes: NamedIndexes;
}

/**
 * Compiles a regex of the http block (location, rewrite, if, map):
 * ngx_http_regex_compile, which also declares a variable per named group.
 */
export function compileHttpRegex<R extends VariableHost>(cf: ConfContext, vars: VariableRegistry<R>, pattern: string, caseless = false): HttpRegex {
  const re = compileRegex(cf, pattern, caseless);
  const namedIndexes = re.names.map((name) => {
    const def = vars.lookup(name);
    if (!def) vars.define({ name, get: () => undefined, changeable: true });
    else if (!def.changeable && !def.set) throw cf.error(`the duplicate "${name}" variable`);
    return { name, index: vars.index(name) };
  });
  return { ...re, pattern, namedIndexes };
}

/** Variables named groups set: an index per group name. */
export type NamedIndexes = ReadonlyArray<{ name: string; index: number }>;

/**
 * Matches `subject` (ngx_http_regex_exec): on a match the request's
 * captures ($0..$9) become this match's and named groups set their variables.
 */
export function execRegex(r: VariableHost, re: HttpRegex, subject: string): boolean {
  const m = re.regex.exec(subject);
  if (!m) return false;
  applyMatch(r, m, re.namedIndexes);
  return true;
}

/** Records a successful match on the request: captures and named-group variables. */
export function applyMatch(r: VariableHost, m: RegExpExecArray, named: NamedIndexes | undefined): void {
  const caps: string[] = new Array(m.length);
  for (let i = 0; i < m.length; i++) caps[i] = m[i] ?? '';
  r.captures = caps;
  if (named && named.length) {
    const groups = m.groups!;
    for (const n of named) r.varCache[n.index] = groups[n.name] ?? '';
  }
}

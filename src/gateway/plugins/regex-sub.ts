/**
 * What APISIX's proxy-rewrite and redirect do with `regex_uri`: ngx.re.match
 * and ngx.re.sub with the options "jo" — PCRE patterns through ngx.re's
 * translator (src/lua/re.ts), the first match replaced by a template of
 * `$N`, `${N}`, `$0` and `$$` (src/lua/re-template.ts) — and
 * core.utils.resolve_var_with_captures for header values (`$N` / `${N}` of
 * the match, empty when there is no such capture).
 */
import { compile, compileError } from '../../lua/re.ts';
import { parseTemplate, TEMPLATE_ERROR } from '../../lua/re-template.ts';

/** A match: where it starts, how long it is, and PCRE's captures (0 the whole match; unset ones undefined). */
export interface UriMatch { index: number; length: number; captures: Array<string | undefined> }

/** PCRE's captures of a match of a compiled pattern (its groups are named `_N` by the translation). */
export function capturesOf(m: RegExpExecArray, count: number): Array<string | undefined> {
  const captures: Array<string | undefined> = [m[0]];
  for (let n = 1; n <= count; n++) captures.push(m.groups?.[`_${n}`]);
  return captures;
}

/** The pattern's first match in the subject (ngx.re.match, "jo"), or null; throws when the pattern does not compile. */
export function firstMatch(subject: string, pattern: string): UriMatch | null {
  const c = compile(pattern, 'jo');
  c.regex.lastIndex = 0;
  const m = c.regex.exec(subject);
  return m && { index: m.index, length: m[0].length, captures: capturesOf(m, c.pattern.captures) };
}

/** A template's text for the captures as ngx.re.sub writes it (a template that does not compile: as it was written). */
export function expandTemplate(template: string, captures: ReadonlyArray<string | undefined>): string {
  const parts = parseTemplate(template);
  return typeof parts === 'string' ? template : parts.map((p) => (typeof p === 'string' ? p : captures[p] ?? '')).join('');
}

/** The subject with match `m` replaced by the template as ngx.re.sub replaces it. */
export function replaceMatch(subject: string, m: UriMatch, template: string): string {
  return subject.slice(0, m.index) + expandTemplate(template, m.captures) + subject.slice(m.index + m.length);
}

/** The subject with the pattern's first match replaced as ngx.re.sub would; undefined when it does not match. */
export function reSub(subject: string, pattern: string, template: string): string | undefined {
  const m = firstMatch(subject, pattern);
  return m ? replaceMatch(subject, m, template) : undefined;
}

/** `$N` / `${N}` (not after a backslash) replaced by capture N, empty when there is none. */
export function withCaptures(template: string, captures: ReadonlyArray<string | undefined> | undefined): string {
  if (!template.includes('$')) return template;
  return template.replace(/(?<!\\)\$\{?(\d+)\}?/g, (_t, n: string) => captures?.[Number(n)] ?? '');
}

/** What ngx.re.sub("/fake_uri", pattern, template, "jo") returns as its error (APISIX's checks), or undefined. */
export function regexUriError(pattern: string, template: string): string | undefined {
  return compileError(pattern, 'jo') ?? (typeof parseTemplate(template) === 'string' ? TEMPLATE_ERROR : undefined);
}

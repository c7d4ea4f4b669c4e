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

/** The pattern's first match in the subject (ngx.re.match, "jo"), or null; throws when the pattern does not compile. */
export function firstMatch(subject: string, pattern: string): UriMatch | null {
  const c = compile(pattern, 'jo');
  c.regex.lastIndex = 0;
  const m = c.regex.exec(subject);
  if (!m) return null;
  const captures: Array<string | undefined> = [m[0]];
  for (let n = 1; n <= c.pattern.captures; n++) captures.push(m.groups?.[`_${n}`]);
  return { index: m.index, length: m[0].length, captures };
}

/** The subject with match `m` replaced by the template as ngx.re.sub replaces it (a bad template: as it was written). */
export function replaceMatch(subject: string, m: UriMatch, template: string): string {
  const parts = parseTemplate(template);
  const replacement = typeof parts === 'string' ? template
    : parts.map((p) => (typeof p === 'string' ? p : m.captures[p] ?? '')).join('');
  return subject.slice(0, m.index) + replacement + subject.slice(m.index + m.length);
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

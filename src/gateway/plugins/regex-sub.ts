/**
 * What APISIX's proxy-rewrite and redirect do with `regex_uri`: ngx.re.sub
 * (the first match replaced; in the template `$N` and `${N}` are captures,
 * `$0` the whole match, `$$` a dollar — JavaScript's replace knows neither
 * `${N}` nor `$0`), and core.utils.resolve_var_with_captures for header
 * values (`$N` / `${N}` of the match, empty when there is no such capture).
 */

/** Compiled patterns by their text (the confs' regex_uri), so a request does not compile its route's again. */
const compiled = new Map<string, RegExp>();
const MAX_COMPILED = 1024;

function regexOf(pattern: string): RegExp {
  let re = compiled.get(pattern);
  if (re === undefined) {
    if (compiled.size >= MAX_COMPILED) compiled.clear();
    re = new RegExp(pattern);
    compiled.set(pattern, re);
  }
  return re;
}

/** The pattern's first match in the subject, or null. */
export function firstMatch(subject: string, pattern: string): RegExpExecArray | null {
  return regexOf(pattern).exec(subject);
}

/** The subject with match `m` replaced by the template as ngx.re.sub replaces it. */
export function replaceMatch(subject: string, m: RegExpExecArray, template: string): string {
  const replacement = template.replace(/\$(?:\{(\d+)\}|(\d+)|(\$))/g, (_t, braced: string | undefined, plain: string | undefined) =>
    (braced ?? plain) === undefined ? '$' : m[Number(braced ?? plain)] ?? '');
  return subject.slice(0, m.index) + replacement + subject.slice(m.index + m[0].length);
}

/** The subject with the pattern's first match replaced as ngx.re.sub would; undefined when it does not match. */
export function reSub(subject: string, pattern: string, template: string): string | undefined {
  const m = firstMatch(subject, pattern);
  return m ? replaceMatch(subject, m, template) : undefined;
}

/** `$N` / `${N}` (not after a backslash) replaced by capture N, empty when there is none. */
export function withCaptures(template: string, captures: string[] | undefined): string {
  if (!template.includes('$')) return template;
  return template.replace(/(?<!\\)\$\{?(\d+)\}?/g, (_t, n: string) => captures?.[Number(n)] ?? '');
}

/** ngx.re.sub's refusal of a template with a `$` that starts neither `$N`, `${N}` nor `$$`. */
function templateError(template: string): string | undefined {
  return /\$(?!\d|\{\d+\}|\$)/.test(template.replace(/\$\$/g, '')) ? 'invalid capturing variable name found' : undefined;
}

/** Why a regex_uri pair cannot work (the pattern does not compile, or the template is bad), or undefined. */
export function regexUriError(pattern: string, template: string): string | undefined {
  try {
    new RegExp(pattern);
  } catch (e) {
    return (e as Error).message;
  }
  return templateError(template);
}

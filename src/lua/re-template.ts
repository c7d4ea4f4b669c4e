/**
 * ngx.re.sub/gsub's replacement template, apart from the Lua bridge so the
 * gateway's regex_uri (proxy-rewrite, redirect) substitutes as ngx.re.sub:
 * `$0`..`$99`, `${N}`, `$$`; anything else after `$` (names too) fails.
 */

/** Literal text and capture numbers, in order. */
export type TemplateParts = ReadonlyArray<string | number>;

/** The template's parts, or the reason it does not compile, as ngx_lua's script compiler logs it. */
export function parseTemplate(text: string): TemplateParts | string {
  const parts: Array<string | number> = [];
  const invalid = `lua script: invalid capturing variable name found in "${text}"`;
  let literal = '';
  for (let i = 0; i < text.length; i++) {
    if (text[i] !== '$') { literal += text[i]; continue; }
    if (++i === text.length) return invalid;
    if (text[i] === '$') { literal += '$'; continue; }
    const bracket = text[i] === '{';
    if (bracket && ++i === text.length) return invalid;
    const digits = /^\d+/.exec(text.slice(i))?.[0];
    if (digits === undefined) {
      const name = /^\w*/.exec(text.slice(i))![0];
      if (!name) return invalid;
      return `attempt to use named capturing variable "${name}" (named captures not supported yet)`;
    }
    i += digits.length;
    if (bracket && text[i] !== '}') return `the closing bracket in "${digits}" variable is missing`;
    if (!bracket) i--;
    if (literal) parts.push(literal);
    literal = '';
    parts.push(Number(digits));
  }
  if (literal) parts.push(literal);
  return parts;
}

/** ngx.re.sub's error for a template that does not compile (the reason goes to the error log). */
export const TEMPLATE_ERROR = 'failed to compile the replacement template';

/**
 * proxy_redirect: rewriting the Location and Refresh fields of upstream
 * responses (ngx_http_proxy_rewrite_redirect). A text pattern matches a
 * prefix of the value and that prefix is replaced; a regex (`~`, `~*`)
 * matches the value and the replacement (with $1...) replaces all of it.
 * `default` is the proxy_pass URL (with `/` added when it has no URI)
 * replaced by the location's name (or `/`).
 */
import type { ConfContext } from '../../../conf/context.ts';
import { applyMatch, compileRegex } from '../../regex.ts';
import type { HttpRequest } from '../../request.ts';
import { compileComplex } from '../../../core/variables.ts';
import type { ComplexValue, VariableRegistry } from '../../../core/variables.ts';
import type { ProxyTarget } from './target.ts';

export interface RedirectRule {
  pattern: ComplexValue | undefined;
  regex: RegExp | undefined;
  replacement: ComplexValue;
  /** `proxy_redirect default` written explicitly: resolved when the location is finished. */
  isDefault?: boolean;
}

/** The rule `proxy_redirect default` stands for, for a location with `target`. */
export function defaultRule(target: ProxyTarget): RedirectRule {
  if (target.uri) {
    return { pattern: constant(target.url), regex: undefined, replacement: constant(target.location) };
  }
  return { pattern: constant(target.url + '/'), regex: undefined, replacement: constant('/') };
}

/** Text used as is, without `$` interpretation (nginx stores these patterns uncompiled). */
function constant(s: string): ComplexValue {
  return { constant: s, source: s, evaluate: () => s };
}

/** Parses `proxy_redirect pattern replacement`. */
export function compileRule(cf: ConfContext, vars: VariableRegistry, pattern: string, replacement: string): RedirectRule {
  const repl = compileComplex(cf, vars, replacement);
  if (pattern.startsWith('~')) {
    const caseless = pattern[1] === '*';
    const re = compileRegex(cf, pattern.slice(caseless ? 2 : 1), caseless);
    return { pattern: undefined, regex: re.regex, replacement: repl };
  }
  return { pattern: compileComplex(cf, vars, pattern), regex: undefined, replacement: repl };
}

/**
 * Applies the rules to `value` from offset `prefix` (after `url=` in
 * Refresh). Returns the new value, or undefined when no rule matched.
 */
export function rewriteRedirect(r: HttpRequest, rules: RedirectRule[], value: string, prefix: number): string | undefined {
  const tail = value.slice(prefix);
  for (const rule of rules) {
    if (rule.regex) {
      const m = rule.regex.exec(tail);
      if (!m) continue;
      applyMatch(r, m, undefined);
      return value.slice(0, prefix) + rule.replacement.evaluate(r);
    }
    const pattern = rule.pattern!.evaluate(r);
    if (pattern.length > tail.length || !tail.startsWith(pattern)) continue;
    return value.slice(0, prefix) + rule.replacement.evaluate(r) + tail.slice(pattern.length);
  }
  return undefined;
}

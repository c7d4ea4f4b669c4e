/**
 * A route's `vars` as lua-resty-expr compiles them: a list of
 * `[var, op, value]` (or `[var, "!", op, value]`) and nested
 * `["OR"|"AND"|"!OR"|"!AND", ...]`; the messages are that library's.
 */
const OPS = new Set(['==', '~=', '>', '>=', '<', '<=', '~~', '~*', 'in', 'has', 'ipmatch']);
const LOGIC = new Set(['OR', 'AND', '!OR', '!AND']);

function checkRule(rule: unknown): string | undefined {
  if (!Array.isArray(rule)) return 'rule should be wrapped inside brackets';
  if (typeof rule[0] === 'string' && LOGIC.has(rule[0])) {
    for (const sub of rule.slice(1)) {
      const err = checkRule(sub);
      if (err) return err;
    }
    return undefined;
  }
  // a list of rules inside a rule: they all must hold (lua-resty-expr's implicit AND)
  if (Array.isArray(rule[0])) {
    for (const sub of rule) {
      const err = checkRule(sub);
      if (err) return err;
    }
    return undefined;
  }
  if (rule.length < 2) return 'invalid expression';
  const op = rule[1] === '!' ? rule[2] : rule[1];
  if (typeof op !== 'string' || !OPS.has(op)) return `invalid operator '${op}'`;
  return undefined;
}

/** lua-resty-expr's `expr.new(rules)` message, or undefined: a list of rules, or one led by a logic operator. */
export function exprError(rules: unknown[]): string | undefined {
  if (rules.length === 0) return undefined;
  if (!Array.isArray(rules[0]) && !(typeof rules[0] === 'string' && LOGIC.has(rules[0]))) return 'rule should be wrapped inside brackets';
  return checkRule(rules);
}

export function checkVars(vars: unknown): string | undefined {
  if (vars === undefined) return undefined;
  const err = exprError(vars as unknown[]);
  return err ? `failed to validate the 'vars' expression: ${err}` : undefined;
}

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

export function checkVars(vars: unknown): string | undefined {
  if (vars === undefined) return undefined;
  const list = vars as unknown[];
  for (const rule of list) {
    const err = checkRule(rule);
    if (err) return `failed to validate the 'vars' expression: ${err}`;
  }
  return undefined;
}

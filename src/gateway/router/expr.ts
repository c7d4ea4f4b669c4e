/**
 * A route's `vars` evaluated as lua-resty-expr does: a list of
 * `[var, op, value]` (or `[var, "!", op, value]`) ANDed, and nested
 * `["OR"|"AND"|"!OR"|"!AND", ...]`. The admin side checked the shape
 * (src/gateway/admin/vars-check.ts); this compiles it once per route
 * version. Comparisons follow lua-resty-expr: a number on the right makes
 * `==`/`~=` numeric, `>`/`<` are numeric or false, a missing variable is
 * nil (equal to nothing, unequal to everything).
 */
import { cidrMatch, clientAddrOf, parseCidr } from '../../core/inet.ts';
import type { Cidr } from '../../core/inet.ts';

/** How a variable is read: an nginx variable name (`arg_x`, `http_x`, `uri`...) to its value. */
export type VarReader = (name: string) => string | undefined;
export type Expr = (read: VarReader) => boolean;

const LOGIC = new Set(['OR', 'AND', '!OR', '!AND']);

function num(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v !== 'string' || v.trim() === '') return undefined;
  const n = Number(v);
  return Number.isNaN(n) ? undefined : n;
}

function compileOp(op: string, right: unknown): (left: string | undefined) => boolean {
  switch (op) {
    case '==':
      if (typeof right === 'number') return (l) => num(l) === right;
      return (l) => l !== undefined && l === String(right);
    case '~=':
      if (typeof right === 'number') return (l) => num(l) !== right;
      return (l) => l === undefined || l !== String(right);
    case '>': case '>=': case '<': case '<=': {
      const r = num(right);
      return (l) => {
        const n = num(l);
        if (n === undefined || r === undefined) return false;
        return op === '>' ? n > r : op === '>=' ? n >= r : op === '<' ? n < r : n <= r;
      };
    }
    case '~~': case '~*': {
      const re = new RegExp(String(right), op === '~*' ? 'i' : '');
      return (l) => l !== undefined && re.test(l);
    }
    case 'in': {
      const set = Array.isArray(right) ? right.map(String) : [];
      const nums = Array.isArray(right) ? right.filter((x) => typeof x === 'number') as number[] : [];
      return (l) => l !== undefined && (set.includes(l) || (nums.length > 0 && nums.includes(num(l) as number)));
    }
    case 'has':
      // the variable holds a list (a repeated header, comma-joined by nginx): one element equals the value
      return (l) => l !== undefined && l.split(/,\s*/).includes(String(right));
    case 'ipmatch': {
      const nets = (Array.isArray(right) ? right : [right]).map((x) => parseCidr(String(x))).filter((c): c is Cidr => c !== undefined);
      return (l) => l !== undefined && cidrMatch(clientAddrOf(l, 0), nets);
    }
    default:
      return () => false;
  }
}

function compileRule(rule: unknown[]): Expr {
  const head = rule[0];
  if (typeof head === 'string' && LOGIC.has(head)) {
    const subs = rule.slice(1).map((x) => compileRule(x as unknown[]));
    const any = head.endsWith('OR');
    const not = head.startsWith('!');
    return (read) => {
      const v = any ? subs.some((s) => s(read)) : subs.every((s) => s(read));
      return not ? !v : v;
    };
  }
  // a list of rules inside a rule: they all must hold (what vars-check.ts accepts)
  if (Array.isArray(head)) {
    const subs = rule.map((x) => compileRule(x as unknown[]));
    return (read) => subs.every((s) => s(read));
  }
  const negate = rule[1] === '!';
  const [name, op, right] = negate ? [rule[0], rule[2], rule[3]] : [rule[0], rule[1], rule[2]];
  const test = compileOp(String(op), right);
  const varName = String(name);
  return negate ? (read) => !test(read(varName)) : (read) => test(read(varName));
}

/** The route's vars as one test (ANDed rules); undefined when there are none. */
export function compileVars(vars: unknown): Expr | undefined {
  if (!Array.isArray(vars) || vars.length === 0) return undefined;
  // one expression led by a logic operator: `["OR", [...], [...]]`
  if (typeof vars[0] === 'string' && LOGIC.has(vars[0])) return compileRule(vars);
  const rules = vars.map((x) => compileRule(x as unknown[]));
  return (read) => rules.every((t) => t(read));
}

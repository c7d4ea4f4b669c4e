/**
 * `if (...)` conditions, parsed as ngx_http_rewrite_if_condition does and
 * compiled into a function of the request: a variable alone (true unless
 * empty or "0"), `=`/`!=` against a string with variables, `~ ~* !~ !~*`
 * regexes (a match sets $1..$9), and the file tests `-f -d -e -x` and their
 * `!` negations.
 */
import fs from 'node:fs';
import type { ConfContext } from '../../../conf/context.ts';
import { sysErrorText } from '../../../conf/errors.ts';
import { compileHttpRegex, execRegex } from '../../regex.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { compileComplex } from '../../../core/variables.ts';
import type { VariableRegistry } from '../../../core/variables.ts';
import { failedCall, symlinkRefusal } from '../../core/disable-symlinks.ts';
import { rewriteLogging, rewriteNotice } from './program.ts';

export type Condition = (r: HttpRequest) => boolean | Promise<boolean>;

/** Compiles the arguments of `if` (parentheses included, as the lexer split them). */
export function compileCondition(cf: ConfContext, vars: VariableRegistry, rawArgs: string[]): Condition {
  const args = [...rawArgs];
  const invalid = (v: string) => cf.error(`invalid condition "${v}"`);
  if (!args[0].startsWith('(')) throw invalid(args[0]);
  let cur = 0;
  if (args[0] === '(') cur = 1;
  else args[0] = args[0].slice(1);
  let last = args.length - 1;
  if (!args[last].endsWith(')')) throw invalid(args[last]);
  if (args[last] === ')') last--;
  else args[last] = args[last].slice(0, -1);
  if (cur > last) throw invalid(rawArgs[0]);

  const p = args[cur];
  if (p.length > 1 && p[0] === '$') {
    if (cur !== last && cur + 2 !== last) throw invalid(p);
    const name = p[1] === '{' && p.endsWith('}') ? p.slice(2, -1) : p.slice(1);
    const index = vars.index(name);
    const valueOf = (r: HttpRequest) => vars.value(r, index) ?? '';
    if (cur === last) {
      return (r) => {
        const v = valueOf(r);
        return v !== '' && v !== '0';
      };
    }
    const op = args[cur + 1];
    const operand = args[last];
    if (op === '=' || op === '!=') {
      const cv = compileComplex(cf, vars, operand);
      const equal = op === '=';
      return (r) => (valueOf(r) === cv.evaluate(r)) === equal;
    }
    if (op === '~' || op === '~*' || op === '!~' || op === '!~*') {
      const re = compileHttpRegex(cf, vars, operand, op.endsWith('*'));
      const negative = op[0] === '!';
      return (r) => {
        const subject = valueOf(r);
        const matched = execRegex(r, re, subject);
        if (!matched) r.captures = undefined;
        if (rewriteLogging(r)) rewriteNotice(r, `"${operand}" ${matched ? 'matches' : 'does not match'} "${subject}"`);
        return matched !== negative;
      };
    }
    throw cf.error(`unexpected "${op}" in condition`);
  }
  if ((p.length === 2 && p[0] === '-') || (p.length === 3 && p.startsWith('!-'))) {
    if (cur + 1 !== last) throw invalid(p);
    const test = FILE_TESTS[p[p.length - 1]];
    if (!test) throw invalid(p);
    return fileCondition(compileComplex(cf, vars, args[last]), test, p[0] === '!');
  }
  throw invalid(p);
}

const FILE_TESTS: Record<string, (st: fs.Stats) => boolean> = {
  f: (st) => st.isFile(),
  d: (st) => st.isDirectory(),
  e: () => true,
  // nginx's ngx_is_exec: the owner's execute bit
  x: (st) => (st.mode & 0o100) !== 0,
};

/** Errors that simply mean "no such file" (others are logged at crit, as nginx does). */
const QUIET = new Set(['ENOENT', 'ENOTDIR', 'ENAMETOOLONG']);

function fileCondition(path: ReturnType<typeof compileComplex>, test: (st: fs.Stats) => boolean, negative: boolean): Condition {
  return async (r) => {
    const file = path.evaluate(r);
    try {
      const refusal = symlinkRefusal(r, file);
      const refused = refusal && await refusal;
      if (refused) throw refused;
      return test(await fs.promises.stat(file)) !== negative;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      if (!QUIET.has(code)) requestLog(r).crit(`${failedCall(err as NodeJS.ErrnoException, 'stat()')} "${file}" failed ${sysErrorText(err)}`);
      return negative;
    }
  };
}

/**
 * The rewrite module's compiled programs: statements (closures built at
 * configuration time) run in order by runBlock, and the module's per-level
 * configuration (the program, `rewrite_log`, `uninitialized_variable_warn`).
 */
import { defineSlot } from '../../../conf/context.ts';
import { LogLevel } from '../../../core/error-log.ts';
import type { HttpRequest } from '../../request.ts';
import { errorLogFor, requestLog } from '../../request-log.ts';

/** A statement's result: NEXT goes on with the following statement; anything else ends the program. */
export const NEXT = -1000;
/** One compiled statement. */
export type Code = (r: HttpRequest) => number | Promise<number>;

export interface RewriteConf {
  /** This level's program; not inherited (each level runs only its own statements). */
  codes: Code[] | undefined;
  log: boolean | undefined;
  warnUninitialized: boolean | undefined;
}

const REWRITE_DEFAULTS = { log: false, warnUninitialized: true } satisfies Partial<RewriteConf>;

export const rewriteConf = defineSlot<RewriteConf, typeof REWRITE_DEFAULTS>(
  'rewrite',
  () => ({ codes: undefined, log: undefined, warnUninitialized: undefined }),
  (parent, child) => {
    if (child.log === undefined) child.log = parent.log;
    if (child.warnUninitialized === undefined) child.warnUninitialized = parent.warnUninitialized;
  },
  REWRITE_DEFAULTS,
);

/** Runs `codes` from `i`; synchronous until a statement has to wait (a file check). */
export function runBlock(codes: Code[], i: number, r: HttpRequest): number | Promise<number> {
  for (; i < codes.length; i++) {
    const rc = codes[i](r);
    if (typeof rc !== 'number') {
      const next = i + 1;
      return rc.then((v) => (v === NEXT ? runBlock(codes, next, r) : v));
    }
    if (rc !== NEXT) return rc;
  }
  return NEXT;
}

/** Whether rewrite notices are logged: `rewrite_log on`, or an error log at debug level (as nginx does). */
export function rewriteLogging(r: HttpRequest): boolean {
  return r.level.get(rewriteConf).log === true || errorLogFor(r).enabled(LogLevel.debug);
}

export function rewriteNotice(r: HttpRequest, msg: string): void {
  requestLog(r).notice(msg);
}

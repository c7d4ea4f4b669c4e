/**
 * Opens a cycle's main error log: its `error_log` directives, or the default
 * (`-e`, else logs/error.log) at level error, as nginx does. A file that
 * cannot be opened is nginx's `open() "…" failed (…)` configuration error.
 */
import type { Cycle } from './cycle.ts';
import { ErrorLog, LogLevel } from './error-log.ts';
import { coreSettings } from './modules/core.ts';
import { ConfError, sysErrorText } from '../conf/errors.ts';

export function openCycleLog(cycle: Cycle, defaultErrorLog: string): ErrorLog {
  const core = coreSettings(cycle);
  const specs = core.errorLogs.length ? core.errorLogs : [{ file: defaultErrorLog, level: LogLevel.error }];
  try {
    return new ErrorLog(specs);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new ConfError(`open() "${e.path ?? specs[0].file}" failed ${sysErrorText(e)}`);
  }
}

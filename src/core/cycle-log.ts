/**
 * Opens a cycle's main error log: its `error_log` directives, or the default
 * (`-e`, else logs/error.log) at level error, as nginx does (also beside
 * error logs that are all syslog, which have no file). A file that
 * cannot be opened is nginx's `open() "…" failed (…)` configuration error.
 */
import type { Cycle } from './cycle.ts';
import { ErrorLog, LogLevel } from './error-log.ts';
import { coreSettings } from './modules/core.ts';
import { ConfError, sysErrorText } from '../conf/errors.ts';

export function openCycleLog(cycle: Cycle, defaultErrorLog: string): ErrorLog {
  const core = coreSettings(cycle);
  const fallback = { file: defaultErrorLog, level: LogLevel.error };
  // ngx_log_open_default: error logs that are all syslog (none has a file) get the default file too
  const specs = !core.errorLogs.length ? [fallback]
    : core.errorLogs.every((s) => s.syslog !== undefined) ? [...core.errorLogs, fallback] : core.errorLogs;
  try {
    return new ErrorLog(specs);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new ConfError(`open() "${e.path ?? specs[0].file}" failed ${sysErrorText(e)}`);
  }
}

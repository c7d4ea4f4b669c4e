/**
 * The arguments of `error_log` as nginx reads them (ngx_errlog_module:
 * ngx_log_set_log, ngx_log_set_levels, and ngx_syslog_process_conf's
 * checks), shared by the main, http and stream contexts and by access_log's
 * `syslog:` target.
 */
import type { ConfContext } from '../conf/context.ts';
import { parseSize } from '../conf/values.ts';
import { Cycle } from './cycle.ts';
import { LogLevel } from './error-log.ts';
import type { ErrorLogSpec } from './error-log.ts';

/** NGX_MAX_ERROR_STR and the other terms of the smallest `memory:` buffer nginx accepts. */
const MEMORY_LOG_OVERHEAD = 'MEMLOG  :\n'.length + 1 + 20 + 20 + 2048;

const ERROR_LEVELS = ['emerg', 'alert', 'crit', 'error', 'warn', 'notice', 'info', 'debug'] as const;
const DEBUG_LEVELS = ['debug_core', 'debug_alloc', 'debug_mutex', 'debug_event', 'debug_http', 'debug_mail', 'debug_stream'];

/**
 * Parses `error_log file|stderr|syslog:...|memory:size [level ...]`
 * (ngx_log_set_log; shared by the main, http and stream contexts). `syslog:`
 * sends each line as a datagram (src/core/access-log/syslog.ts) and
 * `memory:` is dropped (see docs/directives.md).
 */
export function parseErrorLog(cf: ConfContext, args: string[]): ErrorLogSpec {
  const target = args[0];
  let file: string;
  if (target === 'stderr' || target === '') {
    file = 'stderr';
  } else if (target.startsWith('memory:')) {
    const size = parseSize(target.slice(7));
    const needed = MEMORY_LOG_OVERHEAD + (cf.node?.file === 'command line' ? 0 : cf.node?.file.length ?? 0);
    if (!(size >= needed)) throw cf.error(`invalid buffer size "${target.slice(7)}"`);
    // nginx keeps these lines in a buffer only a debugger reads
    file = '/dev/null';
  } else if (target.startsWith('syslog:')) {
    checkSyslog(cf, target.slice(7));
    return { file: 'stderr', level: parseLogLevels(cf, args.slice(1)), syslog: target.slice(7) };
  } else {
    file = cf.prefixPath(target);
  }
  const level = parseLogLevels(cf, args.slice(1));
  if (file !== 'stderr' && file !== '/dev/null') Cycle.of(cf).registerOpenFile(file);
  return { file, level };
}

/** ngx_log_set_levels: one level, or debug_* masks (any of them means debug here). */
function parseLogLevels(cf: ConfContext, names: string[]): number {
  if (names.length === 0) return LogLevel.error;
  let level = 0;
  let debugMask = false;
  for (const name of names) {
    const n = (ERROR_LEVELS as readonly string[]).indexOf(name);
    if (n >= 0) {
      if (level !== 0 || debugMask) throw cf.error(`duplicate log level "${name}"`);
      level = n + 1;
    } else if (DEBUG_LEVELS.includes(name)) {
      if (level !== 0) throw cf.error(`invalid log level "${name}"`);
      debugMask = true;
    } else {
      throw cf.error(`invalid log level "${name}"`);
    }
  }
  return debugMask ? LogLevel.debug : level;
}

const SYSLOG_FACILITIES = ['kern', 'user', 'mail', 'daemon', 'auth', 'intern', 'lpr', 'news', 'uucp', 'clock', 'authpriv',
  'ftp', 'ntp', 'audit', 'alert', 'cron', 'local0', 'local1', 'local2', 'local3', 'local4', 'local5', 'local6', 'local7'];

/** ngx_syslog_process_conf's checks of `syslog:server=...,facility=...,severity=...,tag=...,nohostname`. */
export function checkSyslog(cf: ConfContext, spec: string): void {
  const seen = new Set<string>();
  for (const p of spec.split(',')) {
    const eq = p.indexOf('=');
    const key = eq > 0 ? p.slice(0, eq) : p;
    const value = p.slice(eq + 1);
    if (key === 'nohostname' && eq < 0) continue;
    if (!['server', 'facility', 'severity', 'tag'].includes(key) || eq < 0) throw cf.error(`unknown syslog parameter "${p}"`);
    if (seen.has(key)) throw cf.error(`duplicate syslog "${key}"`);
    seen.add(key);
    if (key === 'server' && value === '') throw cf.error(`no host in syslog server "${value}"`);
    if (key === 'facility' && !SYSLOG_FACILITIES.includes(value)) throw cf.error(`unknown syslog facility "${value}"`);
    if (key === 'severity' && !(ERROR_LEVELS as readonly string[]).includes(value)) throw cf.error(`unknown syslog severity "${value}"`);
    if (key === 'tag') {
      if (value.length > 32) throw cf.error('syslog tag length exceeds 32');
      if (!/^[0-9A-Za-z_]*$/.test(value)) throw cf.error('syslog "tag" only allows alphanumeric characters and underscore');
    }
  }
  if (!seen.has('server')) throw cf.error('no syslog server specified');
}

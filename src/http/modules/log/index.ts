/**
 * ngx_http_log_module: `log_format`, `access_log`, `open_log_file_cache`,
 * and the log phase that writes one line per request and log, after the
 * response (also for error pages, client aborts and malformed requests).
 *
 * Formats, `if=` conditions and paths with variables are compiled when
 * read. Files are opened by each worker when it loads the configuration (a
 * file that cannot be opened fails the start or the reload, as in nginx) and
 * closed when that configuration stops serving; `-t` opens them all.
 *
 * The directives and the writing are shared with the stream log module
 * (access-log.ts); this file holds what only http has: the `combined`
 * format and the default `logs/access.log combined`, the built-in log
 * operations, the root directory rule for paths with variables, the log
 * phase and the request's error log context.
 */
import fs from 'node:fs';
import { defineSlot } from '../../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../../conf/directive.ts';
import type { Directive } from '../../../conf/directive.ts';
import { sysErrorText } from '../../../conf/errors.ts';
import type { Cycle } from '../../../core/cycle.ts';
import { LogLevel } from '../../../core/error-log.ts';
import { httpConf, httpMainOf, OK } from '../../http-conf.ts';
import type { HttpMainConf, HttpModule, PhaseHandler } from '../../http-conf.ts';
import type { HttpRequest } from '../../request.ts';
import { openRequestErrorLogs, requestErrorLogFiles, requestLog } from '../../request-log.ts';
import { mapUriToPath } from '../../core/root.ts';
import { timeIso8601, timeLocal } from '../../../core/local-time.ts';
import { logFileFor, mergeLogLevel, newLogMain, openLogFiles, renderOf, setAccessLog, setLogFormat, setOpenLogFileCache, writeAccessLogs } from '../../../core/access-log/access-log.ts';
import type { AccessLog, AccessLogProtocol, LogLevelConf, LogMainConf } from '../../../core/access-log/access-log.ts';
import { parseFormat } from '../../../core/access-log/format.ts';
import type { LogOps, Render } from '../../../core/access-log/format.ts';

/** nginx's built-in `combined` format. */
const COMBINED_FORMAT = '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"';

interface HttpLogMain extends LogMainConf<HttpRequest> {
  /** nginx's default `logs/access.log combined`, for servers with no access_log of their own. */
  defaultLogs?: AccessLog<HttpRequest>[];
}

const logLoc = defineSlot<LogLevelConf<HttpRequest>>('http_log_loc', () => ({}), mergeLogLevel);

const logMain = defineSlot<HttpLogMain>('http_log_main', () => newLogMain([{ name: 'combined', ...parseFormat([COMBINED_FORMAT]) }]));

let clockSecond = -1;
let clockLocal = '';
let clockIso = '';

/** nginx's cached log times, formatted once per second. */
function refreshClock(): void {
  const sec = Math.floor(Date.now() / 1000);
  if (sec === clockSecond) return;
  const d = new Date(sec * 1000);
  clockLocal = timeLocal(d);
  clockIso = timeIso8601(d);
  clockSecond = sec;
}

/**
 * nginx's built-in log operations (ngx_http_log_vars): values computed at
 * log time without the variable machinery, never escaped.
 */
const BUILTINS: Record<string, Render<HttpRequest>> = {
  pipe: (r) => (r.pipelined ? 'p' : '.'),
  time_local: () => { refreshClock(); return clockLocal; },
  time_iso8601: () => { refreshClock(); return clockIso; },
  msec: () => (Date.now() / 1000).toFixed(3),
  request_time: (r) => (Math.max(0, Date.now() - r.startMs) / 1000).toFixed(3),
  bytes_sent: (r) => String(r.sink.bytesSent),
  body_bytes_sent: (r) => String(r.sink.bodyBytesSent),
  request_length: (r) => String(r.requestLength),
};

const HTTP_LOG_OPS: LogOps<HttpRequest> = {
  builtins: BUILTINS,
  plain: new Set(['status', 'connection', 'connection_requests', 'remote_port', 'server_port', 'pid', 'msec']),
};

const LOGGING = 'logging request';

/** As nginx documents, a path with variables is not written while the request's root directory does not exist. */
function rootExists(r: HttpRequest): boolean {
  const mapped = mapUriToPath(r);
  const root = mapped.path.slice(0, mapped.rootLength);
  try {
    if (fs.statSync(root).isDirectory()) return true;
    requestLog(r, LOGGING).error(`testing "${root}" existence failed (20: Not a directory)`);
  } catch (e) {
    requestLog(r, LOGGING).error(`testing "${root}" existence failed ${sysErrorText(e)}`);
  }
  return false;
}

/** What the shared access log (access-log.ts) needs to know about http. */
const HTTP_LOG: AccessLogProtocol<HttpRequest> = {
  block: 'http',
  main: logMain,
  level: logLoc,
  variables: (cf) => httpMainOf(cf).variables,
  defaultFormat: 'combined',
  ops: HTTP_LOG_OPS,
  report: (r, level, message) => requestLog(r, LOGGING).log(level, message),
  mayWritePath: rootExists,
};

const directives: Directive[] = [
  { name: 'log_format', contexts: Ctx.HTTP, args: [2, Infinity], handler: (cf, node) => setLogFormat(HTTP_LOG, cf, node) },
  { name: 'access_log', contexts: HTTP_ANY | Ctx.LIF | Ctx.LMT, args: [1, Infinity], handler: (cf, node) => setAccessLog(HTTP_LOG, cf, node) },
  { name: 'open_log_file_cache', contexts: HTTP_ANY, args: [1, 4], handler: (cf, node) => setOpenLogFileCache(HTTP_LOG, cf, node) },
];

function logPhase(main: HttpLogMain): PhaseHandler {
  return (r) => {
    const conf = r.level.get(logLoc);
    if (conf.off) return OK;
    const logs = conf.logs ?? main.defaultLogs;
    if (logs !== undefined) writeAccessLogs(HTTP_LOG, r, logs, conf.cache ?? undefined);
    return OK;
  };
}

/** nginx creates the default log for servers that have no access_log of their own (and are not `off`). */
function addDefaultLog(cycle: Cycle, http: HttpMainConf, main: HttpLogMain): void {
  const needed = http.servers.some((s) => {
    const c = s.level.get(logLoc);
    return c.logs === undefined && !c.off;
  });
  if (!needed) return;
  const file = cycle.paths.prefix + 'logs/access.log';
  cycle.registerOpenFile(file);
  main.defaultLogs = [{ render: renderOf(main.formats[0], http.variables, HTTP_LOG_OPS), file: logFileFor(main, file) }];
}

export const logModule: HttpModule = {
  name: 'ngx_http_log_module',
  directives,
  postconfiguration(http) {
    const main = http.level.get(logMain);
    http.addPhaseHandler('LOG', 100, logPhase(main));
    // not one of nginx's filters: notes the response's start before any filter runs
  },
  initCycle(cycle) {
    const http = httpConf(cycle);
    if (!http) return;
    const main = http.level.get(logMain);
    addDefaultLog(cycle, http, main);
    for (const file of requestErrorLogFiles(http)) cycle.registerOpenFile(file);
  },
  initWorker(cycle, worker) {
    const http = httpConf(cycle);
    if (!http) return;
    const closeAll = openLogFiles(http.level.get(logMain));
    let closeErrorLogs: () => void;
    try {
      closeErrorLogs = openRequestErrorLogs(http);
    } catch (e) {
      closeAll();
      throw e;
    }
    worker.onClose(() => {
      closeAll();
      closeErrorLogs();
    });
  },
};

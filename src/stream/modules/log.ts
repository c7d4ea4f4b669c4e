/**
 * ngx_stream_log_module: `log_format`, `access_log` and
 * `open_log_file_cache` of the stream block; one line per session and log
 * when the session ends. Unlike http there is no default log and no
 * built-in format: a format must be defined before an access_log names it.
 * The directives and the writing are the access log both subsystems share
 * (src/core/access-log/access-log.ts); files are the core's LogFile
 * (one write per turn of the event loop, `buffer=`, `flush=`, `gzip`,
 * reopened on USR1).
 */
import { isMainThread } from 'node:worker_threads';
import { defineSlot } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import { checkLogFile } from '../../core/error-log.ts';
import { mergeLogLevel, newLogMain, openLogFiles, setAccessLog, setLogFormat, setOpenLogFileCache, writeAccessLogs } from '../../core/access-log/access-log.ts';
import type { AccessLogProtocol, LogLevelConf } from '../../core/access-log/access-log.ts';
import { streamConf, streamMainOf } from '../conf.ts';
import type { StreamModule } from '../conf.ts';
import type { StreamSession } from '../session.ts';

const logSrv = defineSlot<LogLevelConf<StreamSession>>('stream_log_srv', () => ({}), mergeLogLevel);

const logMain = defineSlot('stream_log_main', () => newLogMain<StreamSession>());

/** What the shared access log needs to know about stream: no default format, no log operations. */
const STREAM_LOG: AccessLogProtocol<StreamSession> = {
  block: 'stream',
  main: logMain,
  level: logSrv,
  variables: (cf) => streamMainOf(cf).variables,
  report: (s, level, message) => s.error(level, message),
};

function logHandler(s: StreamSession): void {
  const conf = s.level.get(logSrv);
  if (conf.off || !conf.logs) return;
  writeAccessLogs(STREAM_LOG, s, conf.logs, conf.cache ?? undefined);
}

const directives: Directive[] = [
  { name: 'log_format', contexts: Ctx.STREAM, args: [2, Infinity], handler: (cf, node) => setLogFormat(STREAM_LOG, cf, node) },
  { name: 'access_log', contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: [1, Infinity], handler: (cf, node) => setAccessLog(STREAM_LOG, cf, node) },
  { name: 'open_log_file_cache', contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: [1, 4], handler: (cf, node) => setOpenLogFileCache(STREAM_LOG, cf, node) },
];

export const streamLogModule: StreamModule = {
  name: 'ngx_stream_log_module',
  directives,
  postconfiguration(stream) {
    stream.addLogHandler(logHandler);
  },
  initCycle(cycle) {
    const stream = streamConf(cycle);
    // the master checks (and creates) every file, as nginx opens them at startup
    if (!stream || !isMainThread) return;
    for (const file of stream.level.get(logMain).files.keys()) {
      const err = checkLogFile(file);
      if (err) throw new ConfError(err);
    }
  },
  initWorker(cycle, worker) {
    const stream = streamConf(cycle);
    if (!stream) return;
    worker.onClose(openLogFiles(stream.level.get(logMain)));
  },
};

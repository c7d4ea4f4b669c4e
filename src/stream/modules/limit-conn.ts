/**
 * ngx_stream_limit_conn_module: `limit_conn_zone key zone=name:size`,
 * `limit_conn zone number` (stream and server; a server with its own
 * inherits none), `limit_conn_log_level`, `limit_conn_dry_run` and
 * `$limit_conn_status`. A session takes one from each limit in the
 * preaccess phase (after `set`) and gives them back when it ends; one over
 * the limit is closed with `$status` 503. The zones and the counting are
 * the core's (src/core/conn-limit.ts), as in http, with zones of their own.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import { enumArg, flagArg } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import { checkConnZones, LIMIT_CONN_STATUS_NAMES, readLimitConn, readLimitConnZone, REJECTED, releaseConns, takeConns } from '../../core/conn-limit.ts';
import type { ConnLimit } from '../../core/conn-limit.ts';
import { LIMIT_LOG_LEVELS, LogLevel } from '../../core/error-log.ts';
import { DECLINED, Status, streamMainOf } from '../conf.ts';
import type { StreamModule } from '../conf.ts';
import type { StreamSession } from '../session.ts';

const TAG = 'stream_limit_conn';

interface LimitConnConf {
  limits?: ConnLimit<StreamSession>[];
  logLevel?: number;
  dryRun?: boolean;
}

const DEFAULTS = { logLevel: LogLevel.error, dryRun: false } satisfies LimitConnConf;
const limitConnSrv = defineSlot<LimitConnConf, typeof DEFAULTS>('stream_limit_conn_srv', () => ({}), inheritUnset, DEFAULTS);

/** `$limit_conn_status` of each session that a limit applied to. */
const sessionStatus = new WeakMap<StreamSession, number>();

function limitConnHandler(s: StreamSession): number {
  const conf = s.level.get(limitConnSrv);
  if (!conf.limits) return DECLINED;
  const status = takeConns(s, {
    limits: conf.limits, logLevel: conf.logLevel, dryRun: conf.dryRun,
    log: (level, message) => s.error(level, message),
    hold: (held) => s.onEnd(() => releaseConns(held)),
  });
  if (status) sessionStatus.set(s, status);
  return status === REJECTED ? Status.SERVICE_UNAVAILABLE : DECLINED;
}

const ANY = Ctx.STREAM | Ctx.STREAM_SERVER;

export const streamLimitConnModule: StreamModule = {
  name: 'ngx_stream_limit_conn_module',
  directives: [
    { name: 'limit_conn_zone', contexts: Ctx.STREAM, args: 2, handler: (cf, node) => readLimitConnZone(cf, node, streamMainOf(cf).variables, TAG) },
    { name: 'limit_conn', contexts: ANY, args: 2, handler: (cf, node) => readLimitConn(cf, node, cf.get(limitConnSrv), TAG) },
    { name: 'limit_conn_log_level', contexts: ANY, args: 1, handler: setting(limitConnSrv, 'logLevel', (cf, v) => LogLevel[enumArg(cf, v, LIMIT_LOG_LEVELS)]) },
    { name: 'limit_conn_dry_run', contexts: ANY, args: 'flag', handler: setting(limitConnSrv, 'dryRun', flagArg) },
  ],
  variables: [
    { name: 'limit_conn_status', noCache: true, get: (s) => LIMIT_CONN_STATUS_NAMES[sessionStatus.get(s) ?? 0] || undefined },
  ],
  postconfiguration(stream) {
    stream.addPhaseHandler('PREACCESS', limitConnHandler);
  },
  initConf: (cycle) => checkConnZones(cycle, TAG),
};

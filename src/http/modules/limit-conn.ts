/**
 * ngx_http_limit_conn_module: `limit_conn_zone key zone=name:size`,
 * `limit_conn zone number` (several per level; a level with its own
 * inherits none), `limit_conn_status`, `limit_conn_log_level`,
 * `limit_conn_dry_run` and `$limit_conn_status`.
 *
 * A key's count of requests in progress lives in a shared zone, counted by
 * the core's limit_conn (src/core/conn-limit.ts, shared with stream). A
 * request takes one from each limit of its location and gives them back
 * when it ends — answered, failed or abandoned by the client (nginx frees
 * them with the request's memory).
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import { enumArg, flagArg } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import { checkConnZones, LIMIT_CONN_STATUS_NAMES, readLimitConn, readLimitConnZone, REJECTED, releaseConns, takeConns } from '../../core/conn-limit.ts';
import type { ConnLimit } from '../../core/conn-limit.ts';
import { LIMIT_LOG_LEVELS, LogLevel } from '../../core/error-log.ts';
import { DECLINED, httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { statusArg } from './limit-req.ts';

const TAG = 'limit_conn';

interface LimitConnConf {
  limits?: ConnLimit<HttpRequest>[];
  logLevel?: number;
  status?: number;
  dryRun?: boolean;
}

const LIMIT_CONN_DEFAULTS = { logLevel: LogLevel.error, status: 503, dryRun: false } satisfies LimitConnConf;
const limitConnSlot = defineSlot<LimitConnConf, typeof LIMIT_CONN_DEFAULTS>('limit_conn', () => ({}), inheritUnset, LIMIT_CONN_DEFAULTS);

// $limit_conn_status (nginx keeps it on the main request: an internal redirect does not count again)
const requestStatus = new WeakMap<HttpRequest, number>();

function limitConnHandler(r: HttpRequest): number {
  const conf = r.level.get(limitConnSlot);
  const limits = conf.limits;
  if (!limits || requestStatus.has(r)) return DECLINED;
  const status = takeConns(r, {
    limits, logLevel: conf.logLevel, dryRun: conf.dryRun,
    log: (level, message) => requestLog(r).log(level, message),
    // 'close' comes once the response is done or the connection is gone, after the log phase
    hold: (held) => r.sink.onClose(() => releaseConns(held)),
  });
  if (status) requestStatus.set(r, status);
  return status === REJECTED ? conf.status : DECLINED;
}

export const limitConnModule: HttpModule = {
  name: 'ngx_http_limit_conn_module',
  directives: [
    { name: 'limit_conn_zone', contexts: Ctx.HTTP, args: 2, handler: (cf, node) => readLimitConnZone(cf, node, httpMainOf(cf).variables, TAG) },
    { name: 'limit_conn', contexts: HTTP_ANY, args: 2, handler: (cf, node) => readLimitConn(cf, node, cf.get(limitConnSlot), TAG) },
    {
      name: 'limit_conn_log_level', contexts: HTTP_ANY, args: 1,
      handler: setting(limitConnSlot, 'logLevel', (cf, v) => LogLevel[enumArg(cf, v, LIMIT_LOG_LEVELS)]),
    },
    {
      name: 'limit_conn_status', contexts: HTTP_ANY, args: 1,
      handler: setting(limitConnSlot, 'status', statusArg),
    },
    {
      name: 'limit_conn_dry_run', contexts: HTTP_ANY, args: 'flag',
      handler: setting(limitConnSlot, 'dryRun', flagArg),
    },
  ],
  variables: [
    { name: 'limit_conn_status', noCache: true, get: (r) => LIMIT_CONN_STATUS_NAMES[requestStatus.get(r) ?? 0] || undefined },
  ],
  postconfiguration(http) {
    // nginx's preaccess phase: realip 100, limit_req 200, limit_conn 300
    http.addPhaseHandler('PREACCESS', 300, limitConnHandler);
  },
  initConf: (cycle) => checkConnZones(cycle, TAG),
};

/**
 * ngx_http_limit_conn_module: `limit_conn_zone key zone=name:size`,
 * `limit_conn zone number` (several per level; a level with its own
 * inherits none), `limit_conn_status`, `limit_conn_log_level`,
 * `limit_conn_dry_run` and `$limit_conn_status`.
 *
 * A key's count of requests in progress lives in a shared zone
 * (src/core/shared-zone.ts), one for all workers. A request takes one from
 * each limit of its location and gives them back when it ends — answered,
 * failed or abandoned by the client (nginx frees them with the request's
 * memory); an entry whose count drops to zero is removed.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { MergedConf } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { enumArg, flagArg, parseNumber } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import type { Cycle } from '../../core/cycle.ts';
import { LogLevel, mainErrorLog } from '../../core/error-log.ts';
import { bindZoneKey, declareZone, definedZones, sharedTable, zoneParam } from '../../core/shared-zone.ts';
import type { SharedTable, ZoneDecl } from '../../core/shared-zone.ts';
import { DECLINED, httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { LIMIT_LOG_LEVELS, statusArg } from './limit-req.ts';

const TAG = 'limit_conn';

interface ConnZone {
  keySource: string;
  key: ComplexValue;
  table: SharedTable;
}

interface ConnLimit {
  zone: ZoneDecl<ConnZone>;
  conn: number;
}

interface LimitConnConf {
  limits?: ConnLimit[];
  logLevel?: number;
  status?: number;
  dryRun?: boolean;
}

const LIMIT_CONN_DEFAULTS = { logLevel: LogLevel.error, status: 503, dryRun: false } satisfies LimitConnConf;
const limitConnSlot = defineSlot<LimitConnConf, typeof LIMIT_CONN_DEFAULTS>('limit_conn', () => ({}), inheritUnset, LIMIT_CONN_DEFAULTS);

// $limit_conn_status (nginx keeps it on the main request: an internal redirect does not count again)
const PASSED = 1, REJECTED = 2, REJECTED_DRY_RUN = 3;
const STATUS_NAMES = ['', 'PASSED', 'REJECTED', 'REJECTED_DRY_RUN'];
const requestStatus = new WeakMap<HttpRequest, number>();

/** The entries a request holds: table and slot, in pairs. */
type Held = Array<SharedTable | number>;

function releaseAll(held: Held): void {
  for (let i = 0; i < held.length; i += 2) {
    const t = held[i] as SharedTable;
    const slot = held[i + 1] as number;
    t.lock();
    const v = t.values(slot);
    if (--t.f64[v] <= 0) t.remove(slot);
    t.unlock();
  }
  held.length = 0;
}

function limitConnHandler(r: HttpRequest): number {
  const conf = r.level.get(limitConnSlot);
  const limits = conf.limits;
  if (!limits || requestStatus.has(r)) return DECLINED;
  let held: Held | undefined;
  for (const limit of limits) {
    const zone = limit.zone.data!;
    const key = zone.key.evaluate(r);
    if (key.length === 0) continue;
    if (key.length > 255) {
      requestLog(r).error(`the value of the "${zone.keySource}" key is more than 255 bytes: "${key}"`);
      continue;
    }
    requestStatus.set(r, PASSED);
    const t = zone.table;
    const hash = t.prepare(key);
    t.lock();
    let slot = t.find(hash);
    if (slot === 0) {
      slot = t.insert(hash);
      if (slot === 0) {
        t.unlock();
        mainErrorLog().crit(`ngx_slab_alloc() failed: no memory in limit_conn_zone "${limit.zone.name}"`);
        return reject(r, conf, held);
      }
      t.f64[t.values(slot)] = 1;
    } else {
      const v = t.values(slot);
      if (t.f64[v] >= limit.conn) {
        t.unlock();
        requestLog(r).log(conf.logLevel, `limiting connections${conf.dryRun ? ', dry run,' : ''} by zone "${limit.zone.name}"`);
        return reject(r, conf, held);
      }
      t.f64[v]++;
    }
    t.unlock();
    if (!held) {
      held = [];
      const mine = held;
      // 'close' comes once the response is done or the connection is gone, after the log phase
      r.sink.onClose(() => releaseAll(mine));
    }
    held.push(t, slot);
  }
  return DECLINED;
}

function reject(r: HttpRequest, conf: MergedConf<typeof limitConnSlot>, held: Held | undefined): number {
  if (held) releaseAll(held);
  if (conf.dryRun) {
    requestStatus.set(r, REJECTED_DRY_RUN);
    return DECLINED;
  }
  requestStatus.set(r, REJECTED);
  return conf.status;
}

function limitConnZoneDirective(cf: ConfContext, node: ConfNode): undefined {
  const key = compileComplex(cf, httpMainOf(cf).variables, node.args[0]);
  let name = '';
  let size = 0;
  const arg = node.args[1];
  if (!arg.startsWith('zone=')) throw cf.error(`invalid parameter "${arg}"`);
  [name, size] = zoneParam(cf, arg);
  if (name === '') throw cf.error(`"${node.name}" must have "zone" parameter`);
  const decl = declareZone<ConnZone>(cf, name, size, TAG);
  if (decl.data) throw cf.error(`${node.name} "${name}" is already bound to key "${decl.data.keySource}"`);
  decl.data = { keySource: node.args[0], key, table: sharedTable(decl) };
  return undefined;
}

function limitConnDirective(cf: ConfContext, node: ConfNode): string | undefined {
  const conf = cf.get(limitConnSlot);
  const zone = declareZone<ConnZone>(cf, node.args[0], 0, TAG);
  if (!Object.hasOwn(conf, 'limits') || conf.limits === undefined) conf.limits = [];
  // hand-written: a list where only the same zone twice on one level is a duplicate
  if (conf.limits.some((l) => l.zone === zone)) return 'is duplicate';
  const n = parseNumber(node.args[1]);
  if (!(n > 0)) throw cf.error(`invalid number of connections "${node.args[1]}"`);
  if (n > 65535) throw cf.error('connection limit must be less 65536');
  conf.limits.push({ zone, conn: n });
  return undefined;
}

/** The zones of a loaded configuration are all defined, and keep their keys across reloads. */
function checkZones(cycle: Cycle): void {
  for (const decl of definedZones<ConnZone>(cycle, TAG)) {
    const changed = bindZoneKey('limit_conn_zone', decl, decl.data!.keySource);
    if (changed) throw new ConfError(changed);
  }
}

export const limitConnModule: HttpModule = {
  name: 'ngx_http_limit_conn_module',
  directives: [
    { name: 'limit_conn_zone', contexts: Ctx.HTTP, args: 2, handler: limitConnZoneDirective },
    { name: 'limit_conn', contexts: HTTP_ANY, args: 2, handler: limitConnDirective },
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
    { name: 'limit_conn_status', noCache: true, get: (r) => STATUS_NAMES[requestStatus.get(r) ?? 0] || undefined },
  ],
  postconfiguration(http) {
    // nginx's preaccess phase: realip 100, limit_req 200, limit_conn 300
    http.addPhaseHandler('PREACCESS', 300, limitConnHandler);
  },
  initConf: checkZones,
};

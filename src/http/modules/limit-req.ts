/**
 * ngx_http_limit_req_module: `limit_req_zone key zone=name:size rate=…`,
 * `limit_req zone=name [burst=N] [nodelay | delay=N]` (several per level; a
 * level with its own inherits none), `limit_req_status`,
 * `limit_req_log_level`, `limit_req_dry_run` and `$limit_req_status`.
 *
 * nginx's leaky bucket, in its integer arithmetic: a key's state is its
 * `excess` in 1/1000 requests and the time of its last request in
 * milliseconds; each request adds 1000 and the rate drains `rate * ms /
 * 1000`. Above `burst` the request is rejected; above `delay` it waits
 * (a timer) until the excess over `delay` has drained. With several limits
 * the lookups hold each key's entry (count) until the last limit accounts
 * them all, and the longest delay wins.
 *
 * States live in a shared zone (src/core/shared-zone.ts), one for all
 * workers; when it is full, old drained entries and then the least recently
 * used one are dropped, else the request is answered with the rejection
 * status after nginx's `could not allocate node` alert.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { boundedNumberArg, enumArg, flagArg, numberArg, parseNumber } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import { LIMIT_LOG_LEVELS, LogLevel, mainErrorLog } from '../../core/error-log.ts';
import { bindZoneKey, declareZone, definedZones, monotonicMs, sharedTable, zoneParam } from '../../core/shared-zone.ts';
import type { SharedTable, ZoneDecl } from '../../core/shared-zone.ts';
import type { Cycle } from '../../core/cycle.ts';
import { DECLINED, DONE, httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';

const TAG = 'limit_req';

interface ReqZone {
  keySource: string;
  key: ComplexValue;
  /** Requests per 1000 seconds (nginx: 1 is 0.001 r/s). */
  rate: number;
  table: SharedTable;
}

interface ReqLimit {
  zone: ZoneDecl<ReqZone>;
  /** In 1/1000 requests. */
  burst: number;
  delay: number;
}

interface LimitReqConf {
  limits?: ReqLimit[];
  logLevel?: number;
  status?: number;
  dryRun?: boolean;
}

const LIMIT_REQ_DEFAULTS = { logLevel: LogLevel.error, status: 503, dryRun: false } satisfies LimitReqConf;
const limitReqSlot = defineSlot<LimitReqConf, typeof LIMIT_REQ_DEFAULTS>('limit_req', () => ({}), inheritUnset, LIMIT_REQ_DEFAULTS);

/** The allowed `limit_req_log_level` / `limit_conn_log_level` values. */
/** limit_req_status, limit_conn_status: 400 to 599. */
export const statusArg = boundedNumberArg(400, 599);

// $limit_req_status (nginx keeps it on the main request: an internal redirect does not limit again)
const PASSED = 1, DELAYED = 2, REJECTED = 3, DELAYED_DRY_RUN = 4, REJECTED_DRY_RUN = 5;
const STATUS_NAMES = ['', 'PASSED', 'DELAYED', 'REJECTED', 'DELAYED_DRY_RUN', 'REJECTED_DRY_RUN'];
const requestStatus = new WeakMap<HttpRequest, number>();

// lookup results (nginx's NGX_OK, NGX_AGAIN, NGX_BUSY, NGX_ERROR)
const R_OK = 0, R_AGAIN = 1, R_BUSY = 2, R_ERROR = 3;
/** Out values of lookup(): the excess found and the entry held (R_AGAIN). */
let foundExcess = 0;
let foundSlot = 0;

/** nginx's elapsed time between two requests of a key: a clock step back counts as nothing. */
function elapsed(now: number, last: number): number {
  const ms = now - last;
  return ms < -60000 ? 1 : ms < 0 ? 0 : ms;
}

/**
 * ngx_http_limit_req_lookup, under the zone's lock: the key's excess after
 * this request; the last limit (`account`) stores it, the others hold the
 * entry until accounted.
 */
function lookup(zone: ReqZone, name: string, limit: ReqLimit, hash: number, account: boolean): number {
  const t = zone.table;
  const f = t.f64;
  const now = monotonicMs();
  let slot = t.find(hash);
  if (slot !== 0) {
    t.touch(slot);
    const v = t.values(slot);
    const ms = elapsed(now, f[v]);
    let excess = f[v + 1] - Math.floor(zone.rate * ms / 1000) + 1000;
    if (excess < 0) excess = 0;
    foundExcess = excess;
    if (excess > limit.burst) return R_BUSY;
    if (account) {
      f[v + 1] = excess;
      if (ms) f[v] = now;
      return R_OK;
    }
    f[v + 2]++;
    foundSlot = slot;
    return R_AGAIN;
  }
  foundExcess = 0;
  expire(zone, 1, now);
  slot = t.insert(hash);
  if (slot === 0) {
    expire(zone, 0, now);
    slot = t.insert(hash);
    if (slot === 0) {
      mainErrorLog().alert(`could not allocate node in limit_req zone "${name}"`);
      return R_ERROR;
    }
  }
  const v = t.values(slot);
  if (account) {
    f[v] = now;
    return R_OK;
  }
  f[v + 2] = 1;
  foundSlot = slot;
  return R_AGAIN;
}

/**
 * ngx_http_limit_req_expire: drops up to two least recently used entries
 * that are a minute old and drained; with `force` 0 first the least
 * recently used one whatever its state (unless a request holds it).
 */
function expire(zone: ReqZone, n: number, now: number): void {
  const t = zone.table;
  const f = t.f64;
  while (n < 3) {
    const slot = t.oldest();
    if (slot === 0) return;
    const v = t.values(slot);
    if (f[v + 2] !== 0) return;
    if (n++ !== 0) {
      const ms = Math.abs(now - f[v]);
      if (ms < 60000) return;
      if (f[v + 1] - Math.floor(zone.rate * ms / 1000) > 0) return;
    }
    t.remove(slot);
  }
}

/** Gives back the entries held by limits before `n` (a later limit rejected the request). */
function release(limits: ReqLimit[], held: number[] | undefined, n: number): void {
  if (!held) return;
  for (let i = n - 1; i >= 0; i--) {
    if (!held[i]) continue;
    const t = limits[i].zone.data!.table;
    t.lock();
    t.f64[t.values(held[i]) + 2]--;
    t.unlock();
  }
}

/** Out value of account(): the limit whose delay won. */
let delayLimit: ReqLimit | undefined;

/** ngx_http_limit_req_account: stores the held entries' new excess; returns the longest delay. */
function account(limits: ReqLimit[], held: number[] | undefined, n: number, excess: number, limit: ReqLimit): number {
  let maxDelay = excess <= limit.delay ? 0 : Math.floor((excess - limit.delay) * 1000 / limit.zone.data!.rate);
  delayLimit = limit;
  foundExcess = excess;
  if (!held) return maxDelay;
  for (let i = n - 1; i >= 0; i--) {
    if (!held[i]) continue;
    const zone = limits[i].zone.data!;
    const t = zone.table;
    const f = t.f64;
    t.lock();
    const v = t.values(held[i]);
    const now = monotonicMs();
    const ms = elapsed(now, f[v]);
    let e = f[v + 1] - Math.floor(zone.rate * ms / 1000) + 1000;
    if (e < 0) e = 0;
    if (ms) f[v] = now;
    f[v + 1] = e;
    f[v + 2]--;
    t.unlock();
    if (e <= limits[i].delay) continue;
    const delay = Math.floor((e - limits[i].delay) * 1000 / zone.rate);
    if (delay > maxDelay) {
      maxDelay = delay;
      foundExcess = e;
      delayLimit = limits[i];
    }
  }
  return maxDelay;
}

function excessText(excess: number): string {
  return `${Math.floor(excess / 1000)}.${String(excess % 1000).padStart(3, '0')}`;
}

function limitReqHandler(r: HttpRequest): number | Promise<number> {
  const conf = r.level.get(limitReqSlot);
  const limits = conf.limits;
  if (!limits || requestStatus.has(r)) return DECLINED;
  let rc = -1;
  let excess = 0;
  let held: number[] | undefined;
  let n = 0;
  let limit = limits[0];
  for (; n < limits.length; n++) {
    limit = limits[n];
    const zone = limit.zone.data!;
    const key = zone.key.evaluate(r);
    if (key.length === 0) continue;
    if (key.length > 65535) {
      requestLog(r).error(`the value of the "${zone.keySource}" key is more than 65535 bytes: "${key}"`);
      continue;
    }
    const t = zone.table;
    const hash = t.prepare(key);
    t.lock();
    rc = lookup(zone, limit.zone.name, limit, hash, n === limits.length - 1);
    t.unlock();
    excess = foundExcess;
    if (rc !== R_AGAIN) break;
    (held ??= [])[n] = foundSlot;
  }
  if (rc === -1) return DECLINED;

  if (rc === R_BUSY || rc === R_ERROR) {
    if (rc === R_BUSY) {
      requestLog(r).log(conf.logLevel, `limiting requests${conf.dryRun ? ', dry run' : ''}, excess: ${excessText(excess)} by zone "${limit.zone.name}"`);
    }
    release(limits, held, n);
    if (conf.dryRun) {
      requestStatus.set(r, REJECTED_DRY_RUN);
      return DECLINED;
    }
    requestStatus.set(r, REJECTED);
    return conf.status;
  }

  if (rc === R_AGAIN) excess = 0;
  const delay = account(limits, held, n, excess, limit);
  if (!delay) {
    requestStatus.set(r, PASSED);
    return DECLINED;
  }
  // delaying is logged one level below limiting (info stays info)
  const level = conf.logLevel === LogLevel.info ? LogLevel.info : conf.logLevel + 1;
  requestLog(r).log(level, `delaying request${conf.dryRun ? ', dry run' : ''}, excess: ${excessText(foundExcess)}, by zone "${delayLimit!.zone.name}"`);
  if (conf.dryRun) {
    requestStatus.set(r, DELAYED_DRY_RUN);
    return DECLINED;
  }
  requestStatus.set(r, DELAYED);
  return delayed(r, delay);
}

/**
 * Waits `ms` on a timer. A client that closes its connection meanwhile, or
 * has sent FIN (nginx's ngx_http_test_reading watches an HTTP/1 connection
 * for that), ends the request without a response: logged as 499 with
 * `client prematurely closed connection`.
 */
function delayed(r: HttpRequest, ms: number): Promise<number> {
  return new Promise((resolve) => {
    const socket = r.head.version < 2000 ? r.sink.client : null;
    const clientGone = (): void => {
      if (!r.sink.destroyed) r.sink.abort();
    };
    const onClose = (): void => {
      clearTimeout(timer);
      socket?.off('end', clientGone);
      resolve(DONE);
    };
    const timer = setTimeout(() => {
      r.sink.offClose(onClose);
      socket?.off('end', clientGone);
      resolve(r.finished ? DONE : DECLINED);
    }, ms);
    r.sink.onClose(onClose);
    if (socket?.readableEnded) clientGone();
    else socket?.once('end', clientGone);
  });
}

function limitReqZoneDirective(cf: ConfContext, node: ConfNode): undefined {
  // `sync` (nginx Plus) is the only fourth argument
  if (node.args.length === 4 && !node.args.includes('sync')) throw cf.error(`invalid number of arguments in "${node.name}" directive`);
  const key = compileComplex(cf, httpMainOf(cf).variables, node.args[0]);
  let name = '';
  let size = 0;
  let rate = 1;
  let scale = 1;
  for (const arg of node.args.slice(1)) {
    if (arg.startsWith('zone=')) {
      [name, size] = zoneParam(cf, arg);
      continue;
    }
    if (arg.startsWith('rate=')) {
      let digits = arg.slice(5);
      if (digits.endsWith('r/s')) { scale = 1; digits = digits.slice(0, -3); }
      else if (digits.endsWith('r/m')) { scale = 60; digits = digits.slice(0, -3); }
      rate = parseNumber(digits);
      if (!(rate > 0)) throw cf.error(`invalid rate "${arg}"`);
      continue;
    }
    // nginx Plus synchronizes the zone across a cluster; a single node has nothing to sync
    if (arg === 'sync' && node.args.length === 4) continue;
    throw cf.error(`invalid parameter "${arg}"`);
  }
  if (name === '') throw cf.error(`"${node.name}" must have "zone" parameter`);
  const decl = declareZone<ReqZone>(cf, name, size, TAG);
  if (decl.data) throw cf.error(`${node.name} "${name}" is already bound to key "${decl.data.keySource}"`);
  decl.data = { keySource: node.args[0], key, rate: Math.floor(rate * 1000 / scale), table: sharedTable(decl) };
  return undefined;
}

function limitReqDirective(cf: ConfContext, node: ConfNode): string | undefined {
  const conf = cf.get(limitReqSlot);
  let zone: ZoneDecl<ReqZone> | undefined;
  let burst = 0;
  let delay = 0;
  for (const arg of node.args) {
    if (arg.startsWith('zone=')) {
      zone = declareZone<ReqZone>(cf, arg.slice(5), 0, TAG);
    } else if (arg.startsWith('burst=')) {
      burst = parseNumber(arg.slice(6));
      if (!(burst > 0)) throw cf.error(`invalid burst value "${arg}"`);
    } else if (arg.startsWith('delay=')) {
      delay = parseNumber(arg.slice(6));
      if (!(delay > 0)) throw cf.error(`invalid delay value "${arg}"`);
    } else if (arg === 'nodelay') {
      // nginx: NGX_MAX_INT_T_VALUE / 1000, never reached
      delay = Number.MAX_SAFE_INTEGER / 1000;
    } else {
      throw cf.error(`invalid parameter "${arg}"`);
    }
  }
  if (!zone) throw cf.error(`"${node.name}" must have "zone" parameter`);
  if (!Object.hasOwn(conf, 'limits') || conf.limits === undefined) conf.limits = [];
  // hand-written: a list where only the same zone twice on one level is a duplicate
  if (conf.limits.some((l) => l.zone === zone)) return 'is duplicate';
  conf.limits.push({ zone, burst: burst * 1000, delay: delay * 1000 });
  return undefined;
}

/** The zones of a loaded configuration are all defined, and keep their keys across reloads. */
function checkZones(cycle: Cycle): void {
  for (const decl of definedZones<ReqZone>(cycle, TAG)) {
    const changed = bindZoneKey('limit_req', decl, decl.data!.keySource);
    if (changed) throw new ConfError(changed);
  }
}

export const limitReqModule: HttpModule = {
  name: 'ngx_http_limit_req_module',
  directives: [
    { name: 'limit_req_zone', contexts: Ctx.HTTP, args: [3, 4], handler: limitReqZoneDirective },
    { name: 'limit_req', contexts: HTTP_ANY, args: [1, 3], handler: limitReqDirective },
    {
      name: 'limit_req_log_level', contexts: HTTP_ANY, args: 1,
      handler: setting(limitReqSlot, 'logLevel', (cf, v) => LogLevel[enumArg(cf, v, LIMIT_LOG_LEVELS)]),
    },
    {
      name: 'limit_req_status', contexts: HTTP_ANY, args: 1,
      handler: setting(limitReqSlot, 'status', statusArg),
    },
    {
      name: 'limit_req_dry_run', contexts: HTTP_ANY, args: 'flag',
      handler: setting(limitReqSlot, 'dryRun', flagArg),
    },
  ],
  variables: [
    { name: 'limit_req_status', noCache: true, get: (r) => STATUS_NAMES[requestStatus.get(r) ?? 0] || undefined },
  ],
  postconfiguration(http) {
    // after realip (100), before limit_conn (300), as nginx runs them
    http.addPhaseHandler('PREACCESS', 200, limitReqHandler);
  },
  initConf: checkZones,
};

/**
 * What ngx_http_limit_conn_module and ngx_stream_limit_conn_module share:
 * `limit_conn_zone key zone=name:size`, `limit_conn zone number`, and
 * counting a key's connections in a shared zone (src/core/shared-zone.ts),
 * one for all workers. A request or session takes one from each limit and
 * gives them back when it ends; an entry whose count drops to zero is
 * removed. Each subsystem keeps its own zones (its own tag), its phase
 * handler and its `$limit_conn_status`.
 */
import type { ConfContext } from '../conf/context.ts';
import { ConfError } from '../conf/errors.ts';
import type { ConfNode } from '../conf/parser.ts';
import { parseNumber } from '../conf/values.ts';
import type { Cycle } from './cycle.ts';
import { LogLevel, mainErrorLog } from './error-log.ts';
import { bindZoneKey, declareZone, definedZones, sharedTable, zoneParam } from './shared-zone.ts';
import type { SharedTable, ZoneDecl } from './shared-zone.ts';
import { compileComplex } from './variables.ts';
import type { ComplexValue, VariableHost, VariableRegistry } from './variables.ts';

interface ConnZone<R extends VariableHost> {
  keySource: string;
  key: ComplexValue<R>;
  table: SharedTable;
}

export interface ConnLimit<R extends VariableHost> {
  zone: ZoneDecl<ConnZone<R>>;
  conn: number;
}

/** `$limit_conn_status` values (nginx's NGX_*_LIMIT_CONN_*), indexes of STATUS_NAMES. */
export const PASSED = 1, REJECTED = 2, REJECTED_DRY_RUN = 3;
export const LIMIT_CONN_STATUS_NAMES = ['', 'PASSED', 'REJECTED', 'REJECTED_DRY_RUN'];

/** The entries a request or session holds: table and slot, in pairs. */
export type HeldConns = Array<SharedTable | number>;

export function releaseConns(held: HeldConns): void {
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

/** How a request or session is limited: its settings and where its messages go. */
export interface ConnLimitRun<R extends VariableHost> {
  limits: ConnLimit<R>[];
  logLevel: number;
  dryRun: boolean;
  log(level: number, message: string): void;
  /** The first entry taken: `held` is to be released when the request or session ends. */
  hold(held: HeldConns): void;
}

/**
 * Takes one connection from each limit for `r` (ngx_*_limit_conn_handler).
 * Returns 0 when no limit applied (every key empty), else PASSED, REJECTED
 * or REJECTED_DRY_RUN; a rejection gives back what was taken.
 */
export function takeConns<R extends VariableHost>(r: R, run: ConnLimitRun<R>): number {
  let held: HeldConns | undefined;
  let status = 0;
  const reject = () => {
    if (held) releaseConns(held);
    return run.dryRun ? REJECTED_DRY_RUN : REJECTED;
  };
  for (const limit of run.limits) {
    const zone = limit.zone.data!;
    const key = zone.key.evaluate(r);
    if (key.length === 0) continue;
    if (key.length > 255) {
      run.log(LogLevel.error, `the value of the "${zone.keySource}" key is more than 255 bytes: "${key}"`);
      continue;
    }
    status = PASSED;
    const t = zone.table;
    const hash = t.prepare(key);
    t.lock();
    let slot = t.find(hash);
    if (slot === 0) {
      slot = t.insert(hash);
      if (slot === 0) {
        t.unlock();
        mainErrorLog().crit(`ngx_slab_alloc() failed: no memory in limit_conn_zone "${limit.zone.name}"`);
        return reject();
      }
      t.f64[t.values(slot)] = 1;
    } else {
      const v = t.values(slot);
      if (t.f64[v] >= limit.conn) {
        t.unlock();
        run.log(run.logLevel, `limiting connections${run.dryRun ? ', dry run,' : ''} by zone "${limit.zone.name}"`);
        return reject();
      }
      t.f64[v]++;
    }
    t.unlock();
    if (!held) {
      held = [];
      run.hold(held);
    }
    held.push(t, slot);
  }
  return status;
}

/** `limit_conn_zone key zone=name:size`, the key compiled with `vars`; `tag` is the subsystem's zone use. */
export function readLimitConnZone<R extends VariableHost>(cf: ConfContext, node: ConfNode, vars: VariableRegistry<R>, tag: string): void {
  const key = compileComplex(cf, vars, node.args[0]);
  const arg = node.args[1];
  if (!arg.startsWith('zone=')) throw cf.error(`invalid parameter "${arg}"`);
  const [name, size] = zoneParam(cf, arg);
  if (name === '') throw cf.error(`"${node.name}" must have "zone" parameter`);
  const decl = declareZone<ConnZone<R>>(cf, name, size, tag);
  if (decl.data) throw cf.error(`${node.name} "${name}" is already bound to key "${decl.data.keySource}"`);
  decl.data = { keySource: node.args[0], key, table: sharedTable(decl) };
}

/**
 * `limit_conn zone number` onto `conf.limits` (several per level; a level
 * with its own inherits none). Returns nginx's "is duplicate" for a zone
 * named twice on one level.
 */
export function readLimitConn<R extends VariableHost>(cf: ConfContext, node: ConfNode, conf: { limits?: ConnLimit<R>[] }, tag: string): string | undefined {
  const zone = declareZone<ConnZone<R>>(cf, node.args[0], 0, tag);
  if (!Object.hasOwn(conf, 'limits') || conf.limits === undefined) conf.limits = [];
  if (conf.limits.some((l) => l.zone === zone)) return 'is duplicate';
  const n = parseNumber(node.args[1]);
  if (!(n > 0)) throw cf.error(`invalid number of connections "${node.args[1]}"`);
  if (n > 65535) throw cf.error('connection limit must be less 65536');
  conf.limits.push({ zone, conn: n });
  return undefined;
}

/** The zones of a loaded configuration are all defined, and keep their keys across reloads. */
export function checkConnZones(cycle: Cycle, tag: string): void {
  for (const decl of definedZones<ConnZone<VariableHost>>(cycle, tag)) {
    const changed = bindZoneKey('limit_conn_zone', decl, decl.data!.keySource);
    if (changed) throw new ConfError(changed);
  }
}

/**
 * An upstream's health checks (`checks`), as APISIX runs them with
 * lua-resty-healthcheck (apisix/healthcheck_manager.lua): a target per node
 * (its address and `checks.active.port`), in one of four states — healthy,
 * mostly healthy, mostly unhealthy, unhealthy — held in the workers' shared
 * table (src/gateway/dataplane/counters.ts, APISIX's `upstream-healthcheck`
 * shared dict), so every worker sees what any of them learnt.
 *
 * A success clears the failure counts and a failure the success count; a
 * target turns healthy after `healthy.successes` successes in a row and
 * unhealthy after `http_failures` bad statuses, `tcp_failures` failed
 * connections or `timeouts` timeouts in a row (one count per kind). Active
 * probes (health-probe.ts) run every `healthy.interval` seconds on the
 * healthy targets and every `unhealthy.interval` on the others; each worker
 * keeps the timers, but a period is claimed in the shared table, so one
 * worker probes (resty.healthcheck's shm lock per period). Passive reports
 * come from the proxied requests (GatewayChooser and the log phase).
 *
 * The state is keyed by the upstream's key (`route/1`, `upstream/2`) and its
 * `checks`: a route edit that keeps the checks keeps the state, a change of
 * `checks` starts afresh (APISIX builds a new checker).
 */
import net from 'node:net';
import type tls from 'node:tls';
import { crc32 } from 'node:zlib';
import type { ConfigView, UpstreamConf } from '../router/config-view.ts';
import { peekSlot, withSlot } from './counters.ts';
import type { GatewayNode } from './balancer.ts';
import { probe } from './health-probe.ts';

export interface ActiveChecks {
  type: 'http' | 'https' | 'tcp';
  timeout: number;
  concurrency: number;
  host: string | undefined;
  port: number | undefined;
  http_method: string;
  http_path: string;
  https_verify_certificate: boolean;
  req_headers: string[];
  healthy: { interval: number; http_statuses: number[]; successes: number };
  unhealthy: { interval: number; http_statuses: number[]; http_failures: number; tcp_failures: number; timeouts: number };
}

interface Thresholds {
  healthyStatuses: number[];
  unhealthyStatuses: number[];
  successes: number;
  httpFailures: number;
  tcpFailures: number;
  timeouts: number;
}

type Raw = Record<string, unknown> | undefined;
const obj = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' ? v as Record<string, unknown> : {});

/** `checks.active` with APISIX's schema defaults (apisix/schema_def.lua health_checker_active). */
function activeOf(raw: Raw): ActiveChecks {
  const a = obj(raw);
  const h = obj(a.healthy);
  const u = obj(a.unhealthy);
  return {
    type: (a.type as ActiveChecks['type']) ?? 'http',
    timeout: (a.timeout as number) ?? 1,
    concurrency: (a.concurrency as number) ?? 10,
    host: a.host as string | undefined,
    port: a.port as number | undefined,
    http_method: (a.http_method as string) ?? 'GET',
    http_path: (a.http_path as string) ?? '/',
    https_verify_certificate: (a.https_verify_certificate as boolean) ?? true,
    req_headers: (a.req_headers as string[]) ?? [],
    healthy: {
      interval: (h.interval as number) ?? 1, http_statuses: (h.http_statuses as number[]) ?? [200, 302],
      successes: (h.successes as number) ?? 2,
    },
    unhealthy: {
      interval: (u.interval as number) ?? 1,
      http_statuses: (u.http_statuses as number[]) ?? [429, 404, 500, 501, 502, 503, 504, 505],
      http_failures: (u.http_failures as number) ?? 5, tcp_failures: (u.tcp_failures as number) ?? 2,
      timeouts: (u.timeouts as number) ?? 3,
    },
  };
}

function activeThresholds(a: ActiveChecks): Thresholds {
  return {
    healthyStatuses: a.healthy.http_statuses, unhealthyStatuses: a.unhealthy.http_statuses, successes: a.healthy.successes,
    httpFailures: a.unhealthy.http_failures, tcpFailures: a.unhealthy.tcp_failures, timeouts: a.unhealthy.timeouts,
  };
}

/** `checks.passive` with APISIX's defaults; without it nothing passive is counted (resty.healthcheck's 0 limits). */
function passiveThresholds(raw: Raw): Thresholds | undefined {
  if (!raw) return undefined;
  const h = obj(raw.healthy);
  const u = obj(raw.unhealthy);
  return {
    healthyStatuses: (h.http_statuses as number[]) ?? [200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 306, 307, 308],
    unhealthyStatuses: (u.http_statuses as number[]) ?? [429, 500, 503],
    successes: (h.successes as number) ?? 5, httpFailures: (u.http_failures as number) ?? 5,
    tcpFailures: (u.tcp_failures as number) ?? 2, timeouts: (u.timeouts as number) ?? 7,
  };
}

// target states in the shared table (value 0 of the slot; a new slot is 0: healthy)
const HEALTHY = 0;
const MOSTLY_HEALTHY = 1;
const MOSTLY_UNHEALTHY = 2;
const UNHEALTHY = 3;
const STATE_NAMES = ['healthy', 'mostly_healthy', 'mostly_unhealthy', 'unhealthy'];
// failure counts share value 2 of the slot: http + tcp * 256 + timeouts * 65536 (each at most 254)
const FAILURE_UNIT = { http: 1, tcp: 256, timeout: 65536 } as const;
type FailureKind = keyof typeof FAILURE_UNIT;

export interface HealthTarget {
  /** The node's host:port (as the balancer names it). */
  node: string;
  host: string;
  port: number;
  /** `checks.active.host`: SNI and the target's name. */
  hostname: string | undefined;
  /** The Host header of a probe: `upstream_host` with pass_host rewrite, else the node's name, else the host. */
  hostHeader: string;
  key: string;
}

/** Where the counts are logged, and the store's key prefix that names checkers (`/gateway/` as APISIX's `/apisix/`); the runtime sets them. */
let warn: (msg: string) => void = () => undefined;
let keyPrefix = '/apisix/';
export function setHealthLog(fn: (msg: string) => void, prefix: string): void {
  warn = fn;
  keyPrefix = prefix;
}

/** `route/1` → `/gateway/routes/1`: the upstream's resource key, as APISIX names its checker. */
function resourceKey(upstreamKey: string): string {
  const slash = upstreamKey.indexOf('/');
  return `${keyPrefix}${upstreamKey.slice(0, slash)}s${upstreamKey.slice(slash)}`;
}

export class HealthChecker {
  readonly name: string;
  readonly checksSig: string;
  readonly active: ActiveChecks;
  readonly passive: Thresholds | undefined;
  private readonly activeLimits: Thresholds;
  /** By node name. */
  readonly targets = new Map<string, HealthTarget>();
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly lockKey: string;

  /** The upstream's client certificate, sent by `https` probes (t/node/healthcheck-https.t's nodes ask for one). */
  readonly clientTls: tls.ConnectionOptions | undefined;

  constructor(upstreamKey: string, conf: UpstreamConf, nodes: GatewayNode[], clientTls?: tls.ConnectionOptions) {
    this.clientTls = clientTls;
    const checks = obj(conf.checks);
    this.name = `upstream#${resourceKey(upstreamKey)}`;
    this.checksSig = JSON.stringify(checks);
    this.active = activeOf(checks.active as Raw);
    this.activeLimits = activeThresholds(this.active);
    this.passive = passiveThresholds(checks.passive as Raw);
    const base = `hc\0${this.name}\0${crc32(this.checksSig)}`;
    this.lockKey = `${base}\0lock`;
    for (const n of nodes) {
      const port = this.active.port ?? n.port;
      const host = n.host.startsWith('[') ? n.host.slice(1, -1) : n.host;
      // as healthcheck_manager's compute_targets: upstream_host (rewrite), else the node's name, else checks.active.host, else the address
      const hostHeader = conf.pass_host === 'rewrite' && conf.upstream_host ? conf.upstream_host
        : net.isIP(host) === 0 ? n.host : this.active.host ?? n.host;
      this.targets.set(n.name, { node: n.name, host, port, hostname: this.active.host, hostHeader, key: `${base}\0${host}:${port}\0${this.active.host ?? ''}` });
    }
  }

  /** The control view of a target: resty.healthcheck's get_target_list entry. */
  report(t: HealthTarget): { counter: Record<string, number>; hostname: string; ip: string; port: number; status: string } {
    const [state, successes, failures] = peekSlot(t.key, (f, v) => [f[v], f[v + 1], f[v + 2]]) ?? [HEALTHY, 0, 0];
    // in the order APISIX's t/control/healthcheck.t shows them
    return {
      counter: {
        http_failure: failures % 256, success: successes, tcp_failure: Math.floor(failures / 256) % 256,
        timeout_failure: Math.floor(failures / 65536) % 256,
      },
      hostname: t.hostname ?? t.host, ip: t.host, port: t.port, status: STATE_NAMES[state],
    };
  }

  /** Whether some worker made this checker (a request used the upstream): APISIX lists targets only then. */
  registered(): boolean {
    return peekSlot(`${this.lockKey}\0made`, () => true) ?? false;
  }

  /** Starts the active probes' timers (unref'd: they do not keep a worker alive). */
  start(): void {
    withSlot(`${this.lockKey}\0made`, () => undefined);
    const loop = (healthySide: boolean, seconds: number): void => {
      if (seconds <= 0) return;
      const t = setInterval(() => void this.probeSide(healthySide, seconds * 1000), seconds * 1000);
      t.unref();
      this.timers.push(t);
    };
    loop(true, this.active.healthy.interval);
    loop(false, this.active.unhealthy.interval);
  }

  stop(): void {
    for (const t of this.timers.splice(0)) clearInterval(t);
  }

  /** The target's state name (for the control view and logs). */
  stateOf(t: HealthTarget): string {
    return STATE_NAMES[peekSlot(t.key, (f, v) => f[v]) ?? HEALTHY];
  }

  /** Healthy or mostly healthy (resty.healthcheck's get_target_status); unknown targets are healthy. */
  isHealthy(node: string): boolean {
    const t = this.targets.get(node);
    if (!t) return true;
    const s = peekSlot(t.key, (f, v) => f[v]) ?? HEALTHY;
    return s === HEALTHY || s === MOSTLY_HEALTHY;
  }

  /** A passive report of a failed try (connection error, or timeout). */
  reportFailure(node: string, kind: 'tcp' | 'timeout'): void {
    const t = this.targets.get(node);
    if (t && this.passive) this.failure(t, kind, this.passive);
  }

  /** A status seen from `node`, counted against the passive (or active) lists. */
  reportStatus(node: string, status: number, limits = this.passive): void {
    const t = this.targets.get(node);
    if (!t || !limits) return;
    if (limits.healthyStatuses.includes(status)) this.success(t, limits);
    else if (limits.unhealthyStatuses.includes(status)) this.failure(t, 'http', limits);
  }

  private success(t: HealthTarget, limits: Thresholds): void {
    if (limits.successes === 0) return;
    const change = withSlot(t.key, (f, v) => {
      const s = f[v];
      if (s === HEALTHY) return undefined;
      f[v + 2] = 0;
      const n = ++f[v + 1];
      // the counts stay as they are once the state changed (the control view shows tcp_failure 2 for an unhealthy node)
      const next = n >= limits.successes ? HEALTHY : s === UNHEALTHY ? MOSTLY_UNHEALTHY : s;
      f[v] = next;
      return n;
    });
    if (change !== undefined) this.logCount(t, `healthy SUCCESS increment (${change}/${limits.successes})`);
  }

  private failure(t: HealthTarget, kind: FailureKind, limits: Thresholds): void {
    const limit = kind === 'http' ? limits.httpFailures : kind === 'tcp' ? limits.tcpFailures : limits.timeouts;
    if (limit === 0) return;
    const unit = FAILURE_UNIT[kind];
    const change = withSlot(t.key, (f, v) => {
      const s = f[v];
      if (s === UNHEALTHY) return undefined;
      f[v + 1] = 0;
      const n = Math.floor(f[v + 2] / unit) % 256 + 1;
      f[v + 2] += unit;
      const next = n >= limit ? UNHEALTHY : s === HEALTHY ? MOSTLY_HEALTHY : s;
      f[v] = next;
      return n;
    });
    const what = kind === 'http' ? 'HTTP' : kind === 'tcp' ? 'TCP' : 'TIMEOUT';
    if (change !== undefined) this.logCount(t, `unhealthy ${what} increment (${change}/${limit})`);
  }

  /** resty.healthcheck's warning for every count: `(upstream#/apisix/routes/1) unhealthy TCP increment (1/2) for 'foo.com(127.0.0.1:1970)'`. */
  private logCount(t: HealthTarget, what: string): void {
    warn(`[healthcheck] (${this.name}) ${what} for '${t.hostname ?? t.host}(${t.host}:${t.port})'`);
  }

  /** Claims this period for this worker in the shared table (one worker probes per period). */
  private claim(side: string, periodMs: number): boolean {
    return withSlot(`${this.lockKey}\0${side}`, (f, v, now) => {
      if (f[v] > now) return false;
      f[v] = now + periodMs - 1;
      return true;
    });
  }

  private async probeSide(healthySide: boolean, periodMs: number): Promise<void> {
    const due = [...new Map([...this.targets.values()].map((t) => [t.key, t])).values()]
      .filter((t) => this.isHealthyTarget(t) === healthySide);
    if (due.length === 0 || !this.claim(healthySide ? 'healthy' : 'unhealthy', periodMs)) return;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < due.length) {
        const t = due[next++];
        const r = await probe(t, this.active, this.clientTls);
        if (r.kind === 'status') this.reportStatus(t.node, r.status, this.activeLimits);
        else if (r.kind === 'connected') this.success(t, this.activeLimits);
        else this.failure(t, r.kind, this.activeLimits);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(this.active.concurrency, due.length)) }, worker));
  }

  private isHealthyTarget(t: HealthTarget): boolean {
    const s = peekSlot(t.key, (f, v) => f[v]) ?? HEALTHY;
    return s === HEALTHY || s === MOSTLY_HEALTHY;
  }
}

/** This worker's checkers, by upstream key. */
const checkers = new Map<string, { sig: string; checker: HealthChecker }>();
const byConf = new WeakMap<UpstreamConf, HealthChecker>();

/** The checker of an upstream with `checks`, made (and started) the first time a request uses it. */
export function checkerFor(upstreamKey: string, conf: UpstreamConf, nodes: GatewayNode[], clientTls?: tls.ConnectionOptions): HealthChecker | undefined {
  if (!conf.checks) return undefined;
  // the same configuration object: the same checker, without comparing the checks again
  const known = byConf.get(conf);
  if (known && checkers.get(upstreamKey)?.checker === known) return known;
  const sig = JSON.stringify([conf.checks, conf.nodes, conf.pass_host, conf.upstream_host]);
  const have = checkers.get(upstreamKey);
  if (have?.sig === sig) {
    byConf.set(conf, have.checker);
    return have.checker;
  }
  have?.checker.stop();
  const checker = new HealthChecker(upstreamKey, conf, nodes, clientTls);
  checker.start();
  checkers.set(upstreamKey, { sig, checker });
  byConf.set(conf, checker);
  return checker;
}

/** The upstream an upstream key names in `view`. */
function upstreamAt(view: ConfigView, key: string): UpstreamConf | undefined {
  const slash = key.indexOf('/');
  const kind = key.slice(0, slash);
  const id = key.slice(slash + 1);
  if (kind === 'upstream') return view.upstreams.get(id);
  if (kind === 'service') return view.services.get(id)?.upstream;
  if (kind === 'route') return view.routes.find((r) => String(r.id) === id)?.upstream;
  if (kind === 'stream_route') return view.streamRoutes.find((r) => String(r.id) === id)?.upstream;
  return undefined;
}

/** A new configuration version: checkers whose upstream is gone or has other checks stop (APISIX destroys them). */
export function pruneCheckers(view: ConfigView): void {
  for (const [key, { checker }] of checkers) {
    const u = upstreamAt(view, key);
    if (u?.checks && JSON.stringify(u.checks) === checker.checksSig) continue;
    checker.stop();
    checkers.delete(key);
  }
}

/** Every checker of this worker (the control API's `/v1/healthcheck`). */
export function allCheckers(): HealthChecker[] {
  return [...checkers.values()].map((c) => c.checker);
}

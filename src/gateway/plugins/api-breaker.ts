/**
 * api-breaker (apisix/plugins/api-breaker.lua): the log phase counts the
 * upstream's answers per host and uri (APISIX's keys, not per route):
 * `unhealthy.failures` of the `unhealthy.http_statuses` in a row start a
 * break, which then lasts 2^n seconds (n: the failures counted over
 * `failures`, at least 1; at most `max_breaker_sec`); while it lasts the
 * access phase answers `break_response_code` (with
 * `break_response_body` and `break_response_headers` when there is a
 * body). `healthy.successes` of the `healthy.http_statuses` clear it all.
 * The counts are shared by every worker (APISIX's shared dict,
 * dataplane/counters.ts).
 */
import { peekSlot, withSlot } from '../dataplane/counters.ts';
import type { PluginContext } from './phase-api.ts';
import type { GatewayPlugin } from './registry.ts';
import { resolveVar } from './resolve-var.ts';

interface ApiBreakerConf {
  break_response_code: number; break_response_body?: string; break_response_headers?: Array<{ key: string; value: string }>;
  max_breaker_sec: number;
  unhealthy: { http_statuses: number[]; failures: number };
  healthy: { http_statuses: number[]; successes: number };
}

// a slot's values: [unhealthy count (0: none), healthy count, the second the last break started (0: none)]
const keyOf = (ctx: PluginContext) => `api-breaker:${ctx.variable('host') ?? ''}${ctx.variable('uri') ?? ''}`;
const nowSec = () => Math.floor(Date.now() / 1000);

/** core.response.get_upstream_status: the last three characters of $upstream_status, as a number. */
function upstreamStatus(ctx: PluginContext): number | undefined {
  const v = ctx.variable('upstream_status');
  if (!v) return undefined;
  const n = Number(v.slice(-3));
  return Number.isNaN(n) || v.slice(-3).trim() === '' ? undefined : n;
}

export const apiBreaker: GatewayPlugin<ApiBreakerConf> = {
  name: 'api-breaker', version: 0.1, priority: 1005,
  schema: {
    type: 'object',
    properties: {
      break_response_code: { type: 'integer', minimum: 200, maximum: 599 },
      break_response_body: { type: 'string' },
      break_response_headers: {
        type: 'array',
        items: {
          type: 'object',
          properties: { key: { type: 'string', minLength: 1 }, value: { type: 'string', minLength: 1 } },
          required: ['key', 'value'],
        },
      },
      max_breaker_sec: { type: 'integer', minimum: 3, default: 300 },
      unhealthy: {
        type: 'object',
        properties: {
          http_statuses: { type: 'array', minItems: 1, items: { type: 'integer', minimum: 500, maximum: 599 }, uniqueItems: true, default: [500] },
          failures: { type: 'integer', minimum: 1, default: 3 },
        },
        default: { http_statuses: [500], failures: 3 },
      },
      healthy: {
        type: 'object',
        properties: {
          http_statuses: { type: 'array', minItems: 1, items: { type: 'integer', minimum: 200, maximum: 499 }, uniqueItems: true, default: [200] },
          successes: { type: 'integer', minimum: 1, default: 3 },
        },
        default: { http_statuses: [200], successes: 3 },
      },
    },
    required: ['break_response_code'],
  },
  access(conf, ctx) {
    const state = peekSlot(keyOf(ctx), (f, v) => [f[v], f[v + 2]]);
    if (!state || state[0] === 0 || state[1] === 0) return undefined;
    const [unhealthy, lasttime] = state;
    // a break lasts 2^n seconds, n growing with each `failures` more failures
    const times = Math.max(Math.floor(unhealthy / conf.unhealthy.failures), 1);
    const breakerTime = Math.min(2 ** times, conf.max_breaker_sec);
    if (lasttime + breakerTime < nowSec()) return undefined;
    // APISIX sends the headers only with a body
    if (conf.break_response_body === undefined) return { status: conf.break_response_code };
    const headers: Record<string, string> = {};
    for (const h of conf.break_response_headers ?? []) {
      const val = resolveVar(h.value, ctx);
      if (h.key.toLowerCase() === 'content-type') headers[h.key] = val;
      else ctx.addResponseHeader(h.key, val);
    }
    return { status: conf.break_response_code, body: conf.break_response_body, headers };
  },
  log(conf, ctx) {
    const status = upstreamStatus(ctx);
    if (status === undefined) return;
    const key = keyOf(ctx);
    if (conf.unhealthy.http_statuses.includes(status)) {
      withSlot(key, (f, v) => {
        f[v] += 1;
        f[v + 1] = 0;
        if (f[v] % conf.unhealthy.failures === 0) f[v + 2] = nowSec();
      });
      return;
    }
    if (!conf.healthy.http_statuses.includes(status)) return;
    peekSlot(key, (f, v) => {
      if (f[v] === 0) return;
      f[v + 1] += 1;
      if (f[v + 1] >= conf.healthy.successes) f.fill(0, v, v + 3);
    });
  },
};

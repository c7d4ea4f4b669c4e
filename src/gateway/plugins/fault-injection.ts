/**
 * fault-injection (apisix/plugins/fault-injection.lua), in the rewrite
 * phase: `delay` waits `duration` seconds, then `abort` answers
 * `http_status` with `body` and `headers` (their `$vars` resolved). Each
 * applies to `percentage` of the requests (all without), and only when one
 * of its `vars` expressions holds (any: they are ORed; none given: always).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { exprError } from '../admin/vars-check.ts';
import { compileVars } from '../router/expr.ts';
import type { Expr } from '../router/expr.ts';
import type { PluginContext } from './phase-api.ts';
import type { GatewayPlugin } from './registry.ts';
import { resolveVar } from './resolve-var.ts';

interface Abort { http_status: number; body?: string; headers?: Record<string, string | number>; percentage?: number; vars?: unknown[][] }
interface Delay { duration: number; percentage?: number; vars?: unknown[][] }
interface FaultInjectionConf { abort?: Abort; delay?: Delay }

const VARS = { type: 'array', maxItems: 20, items: { type: 'array' } };

// per conf object (a new one for each configuration version): its expressions compiled once
const compiled = new WeakMap<unknown[][], Array<Expr | undefined>>();

function varsMatch(vars: unknown[][] | undefined, ctx: PluginContext): boolean {
  if (!vars) return true;
  let exprs = compiled.get(vars);
  if (!exprs) compiled.set(vars, (exprs = vars.map((v) => compileVars(v))));
  // an empty expression holds (lua-resty-expr's eval without rules); no expressions: none holds
  return exprs.some((e) => (e ? e(ctx.variable.bind(ctx)) : true));
}

/** math.random(1, 100) <= percentage. */
function sampleHit(percentage: number | undefined): boolean {
  return percentage === undefined || Math.floor(Math.random() * 100) + 1 <= percentage;
}

export const faultInjection: GatewayPlugin<FaultInjectionConf> = {
  name: 'fault-injection', version: 0.1, priority: 11000,
  schema: {
    type: 'object',
    properties: {
      abort: {
        type: 'object',
        properties: {
          http_status: { type: 'integer', minimum: 200 },
          body: { type: 'string', minLength: 0 },
          headers: {
            type: 'object', minProperties: 1,
            patternProperties: { '^[^:]+$': { oneOf: [{ type: 'string' }, { type: 'number' }] } },
          },
          percentage: { type: 'integer', minimum: 0, maximum: 100 },
          vars: VARS,
        },
        required: ['http_status'],
      },
      delay: {
        type: 'object',
        properties: {
          duration: { type: 'number', minimum: 0 },
          percentage: { type: 'integer', minimum: 0, maximum: 100 },
          vars: VARS,
        },
        required: ['duration'],
      },
    },
    minProperties: 1,
  },
  checkConf(conf) {
    for (const v of [...conf.abort?.vars ?? [], ...conf.delay?.vars ?? []]) {
      const err = exprError(v);
      if (err) return err;
    }
    return undefined;
  },
  rewrite(conf, ctx) {
    const { abort, delay } = conf;
    // both decided before the wait, as APISIX evaluates them
    const abortVars = abort ? varsMatch(abort.vars, ctx) : true;
    const delayVars = delay ? varsMatch(delay.vars, ctx) : true;
    const wait = delay && sampleHit(delay.percentage) && delayVars ? delay.duration * 1000 : 0;
    const answer = () => {
      if (!abort || !sampleHit(abort.percentage) || !abortVars) return undefined;
      const headers: Record<string, string> = {};
      for (const [name, v] of Object.entries(abort.headers ?? {})) headers[name] = typeof v === 'string' ? resolveVar(v, ctx) : String(v);
      return { status: abort.http_status, body: abort.body === undefined ? undefined : resolveVar(abort.body, ctx), headers };
    };
    return wait > 0 ? sleep(wait).then(answer) : answer();
  },
};

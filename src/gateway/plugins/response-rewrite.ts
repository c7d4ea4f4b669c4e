/**
 * response-rewrite (apisix/plugins/response-rewrite.lua): when its `vars`
 * hold for the response (all responses without), the status becomes
 * `status_code`, headers are `add`ed (`"Name: value"`), `set` and
 * `remove`d (or the older flat `{name: value}` form, set), values with
 * `$var`s; `body` (base64-decoded with `body_base64`) replaces the body,
 * which then goes out without a length, as APISIX's.
 */
import { compileVars } from '../router/expr.ts';
import type { Expr } from '../router/expr.ts';
import type { PluginContext } from './phase-api.ts';
import { resolveVars } from './proxy-rewrite.ts';
import type { GatewayPlugin } from './registry.ts';

interface Ops { add?: string[]; set?: Record<string, string>; remove?: string[] }
interface ResponseRewriteConf { status_code?: number; body?: string; body_base64: boolean; headers?: Ops | Record<string, string>; vars?: unknown[] }

const MATCHED = {};
const compiled = new WeakMap<object, Expr | undefined>();

function matched(conf: ResponseRewriteConf, ctx: PluginContext): boolean {
  if (!conf.vars) return true;
  if (!compiled.has(conf)) compiled.set(conf, compileVars(conf.vars));
  const test = compiled.get(conf);
  return test ? test(ctx.variable) : true;
}

function isOps(h: ResponseRewriteConf['headers']): h is Ops {
  return !!h && (Array.isArray(h.add) || (typeof h.set === 'object' && h.set !== null) || Array.isArray(h.remove));
}

export const responseRewrite: GatewayPlugin<ResponseRewriteConf> = {
  name: 'response-rewrite', version: 0.1, priority: 899,
  schema: {
    type: 'object',
    properties: {
      headers: {
        anyOf: [
          { type: 'object', minProperties: 1, properties: {
            add: { type: 'array', minItems: 1, items: { type: 'string', pattern: '^[^:]+:[^:]*[^/]$' } },
            set: { type: 'object', minProperties: 1, patternProperties: { '^[^:]+$': { oneOf: [{ type: 'string' }, { type: 'number' }] } } },
            remove: { type: 'array', minItems: 1, items: { type: 'string', pattern: '^[^:]+$' } },
          } },
          { type: 'object', patternProperties: { '^[^:]+$': { oneOf: [{ type: 'string' }, { type: 'number' }] } } },
        ],
      },
      body: { type: 'string' },
      body_base64: { type: 'boolean', default: false },
      status_code: { type: 'integer', minimum: 200, maximum: 598 },
      vars: { type: 'array' },
      filters: { type: 'array', minItems: 1 },
    },
    dependencies: { body_base64: ['body'] },
  },
  headerFilter(conf, ctx) {
    if (!matched(conf, ctx)) return;
    ctx.state.set(MATCHED, true);
    if (conf.status_code !== undefined) ctx.status = conf.status_code;
    const h = conf.headers;
    if (!h) return;
    if (!isOps(h)) {
      for (const [name, v] of Object.entries(h)) ctx.setResponseHeader(name, resolveVars(String(v), ctx));
      return;
    }
    for (const line of h.add ?? []) {
      const m = /^([^:\s]+)\s*:\s*([^:]+)$/.exec(line);
      if (m) ctx.addResponseHeader(m[1], resolveVars(m[2], ctx));
    }
    for (const [name, v] of Object.entries(h.set ?? {})) ctx.setResponseHeader(name, resolveVars(String(v), ctx));
    for (const name of h.remove ?? []) ctx.setResponseHeader(name, undefined);
  },
  replaceBody(conf, ctx) {
    if (conf.body === undefined || !ctx.state.get(MATCHED)) return undefined;
    return conf.body_base64 ? Buffer.from(conf.body, 'base64') : Buffer.from(conf.body);
  },
};

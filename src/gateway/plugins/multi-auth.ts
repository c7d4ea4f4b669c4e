/**
 * multi-auth (apisix/plugins/multi-auth.lua): each of `auth_plugins`
 * ({name: conf}, in order) runs its own rewrite; the first that lets the
 * request through (a consumer attached, or its anonymous consumer) ends the
 * search. When all refuse: 401 {"message":"Authorization Failed"}. As in
 * the Lua, a refusing plugin's response headers (its WWW-Authenticate) are
 * set as it sets them, so the last refusal's challenge goes out.
 */
import type { GatewayPlugin } from './registry.ts';
import type { PluginContext } from './phase-api.ts';
import { validate } from '../schema/validate.ts';
import { withDefaults } from '../dataplane/plugin-chain.ts';

interface MultiAuthConf { auth_plugins: Array<Record<string, Record<string, unknown>>> }

/** The plugins multi-auth may name (plugin.get), set by index.ts once they are all known. */
const known = new Map<string, GatewayPlugin>();

export function useAuthPlugins(plugins: GatewayPlugin[]): void {
  for (const p of plugins) known.set(p.name, p);
}

/** The (name, conf) pairs as Lua's pairs walks them: an array's keys are its 1-based indexes. */
function entriesOf(item: unknown): Array<[string, unknown]> {
  if (Array.isArray(item)) return item.map((v, i) => [String(i + 1), v]);
  return Object.entries(item as Record<string, unknown>);
}

/** Sub-confs with their schema defaults, once per conf object (the check fills them in APISIX). */
const filled = new WeakMap<object, Record<string, unknown>>();

function confFor(p: GatewayPlugin, conf: Record<string, unknown>): Record<string, unknown> {
  let c = filled.get(conf);
  if (!c) filled.set(conf, (c = withDefaults(p.schema, conf)));
  return c;
}

async function runAll(conf: MultiAuthConf, ctx: PluginContext) {
  let failed = false;
  for (const item of conf.auth_plugins) {
    for (const [name, sub] of entriesOf(item)) {
      const p = known.get(name)!;
      const a = await p.rewrite?.(confFor(p, sub as Record<string, unknown>) as never, ctx);
      if (!a) return undefined;
      for (const [k, v] of Object.entries(a.headers ?? {})) ctx.setResponseHeader(k, v);
      failed = true;
    }
  }
  return failed ? { status: 401, body: { message: 'Authorization Failed' } } : undefined;
}

export const multiAuth: GatewayPlugin<MultiAuthConf> = {
  name: 'multi-auth', version: 0.1, priority: 2600, type: 'auth',
  schema: {
    type: 'object',
    title: 'work with route or service object',
    properties: { auth_plugins: { type: 'array', minItems: 2 } },
    required: ['auth_plugins'],
  },
  async checkConf(conf) {
    for (const item of conf.auth_plugins) {
      if (item === null || typeof item !== 'object') return `bad argument #1 to 'for iterator' (table expected, got ${item === null ? 'userdata' : luaType(item)})`;
      for (const [name, sub] of entriesOf(item)) {
        const p = known.get(name);
        if (!p) return `${name} plugin did not found`;
        if (p.type !== 'auth') return `${name} plugin is not supported`;
        const c = (sub !== null && typeof sub === 'object' && !Array.isArray(sub) ? sub : {}) as Record<string, unknown>;
        const err = validate(p.schema, sub) ?? (await p.checkConf?.(withDefaults(p.schema, c) as never, () => Promise.resolve(undefined)));
        if (err) return `plugin ${name} check schema failed: ${err}`;
      }
    }
    return undefined;
  },
  rewrite: runAll,
};

function luaType(v: unknown): string {
  return typeof v === 'string' ? 'string' : typeof v === 'number' ? 'number' : typeof v === 'boolean' ? 'boolean' : 'nil';
}

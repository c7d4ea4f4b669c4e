/**
 * Plugins on the request path as apisix/plugin.lua runs them: a `plugins`
 * object becomes a chain sorted by priority (higher first; `_meta.priority`
 * overrides; `_meta.disable` leaves a plugin out, `_meta.filter` runs it
 * only for the requests its expression holds for; unknown names are
 * skipped), each conf with its schema's defaults filled in. Chains are
 * built once per configuration object. `_meta.error_response` replaces a
 * failing plugin's answer.
 */
import type { PluginAnswer } from '../plugins/phase-api.ts';
import type { PluginRegistry, GatewayPlugin } from '../plugins/registry.ts';
import type { Schema } from '../schema/validate.ts';
import type { Plugins } from '../router/config-view.ts';
import { compileVars } from '../router/expr.ts';
import type { Expr } from '../router/expr.ts';

export interface ChainLink {
  plugin: GatewayPlugin;
  conf: Record<string, unknown>;
  priority: number;
  /** `_meta.filter`: the plugin runs only for requests these `vars` hold for. */
  filter: Expr | undefined;
}

/** The schema's defaults filled into a copy of `conf`, one level down too (objects with properties). */
export function withDefaults(schema: Schema, conf: Record<string, unknown>): Record<string, unknown> {
  const props = schema.properties as Record<string, Schema> | undefined;
  if (!props) return conf;
  const out: Record<string, unknown> = { ...conf };
  for (const [k, s] of Object.entries(props)) {
    if (out[k] === undefined && s.default !== undefined) out[k] = structuredClone(s.default);
    const v = out[k];
    if (v && typeof v === 'object' && !Array.isArray(v) && s.properties) out[k] = withDefaults(s, v as Record<string, unknown>);
  }
  return out;
}

const chains = new WeakMap<object, ChainLink[]>();

export function chainOf(registry: PluginRegistry, plugins: Plugins | undefined, type: 'route' | 'consumer' = 'route'): ChainLink[] {
  if (!plugins) return [];
  const cached = chains.get(plugins);
  if (cached) return cached;
  const links: ChainLink[] = [];
  for (const [name, raw] of Object.entries(plugins)) {
    const plugin = registry.get(name);
    if (!plugin || !raw || typeof raw !== 'object') continue;
    const meta = raw._meta as { disable?: boolean; priority?: number; filter?: unknown[] } | undefined;
    if (meta?.disable) continue;
    const schema = type === 'consumer' && plugin.consumerSchema ? plugin.consumerSchema : plugin.schema;
    links.push({ plugin, conf: withDefaults(schema, raw), priority: meta?.priority ?? plugin.priority, filter: compileVars(meta?.filter) });
  }
  links.sort((a, b) => b.priority - a.priority);
  chains.set(plugins, links);
  return links;
}

/** `_meta.error_response` answers instead of what the plugin said when it fails the request (plugin.lua), so the reason stays hidden. */
export function withErrorResponse(l: ChainLink, a: PluginAnswer): PluginAnswer {
  const custom = (l.conf._meta as { error_response?: string | object } | undefined)?.error_response;
  return custom === undefined || a.status < 400 || a.engineCode !== undefined ? a : { ...a, body: custom };
}

/** /upstreams (apisix/admin/upstreams.lua). */
import { upstreamSchema } from '../schema/resources.ts';
import type { AdminContext } from './context.ts';
import { defineResource } from './resource.ts';
import { checkUpstream, encryptUpstreamKey } from './upstream-check.ts';

type Conf = Record<string, unknown>;

/** traffic-split's weighted_upstreams naming the upstream. */
function usedByTrafficSplit(plugins: unknown, id: string): boolean {
  const rules = (plugins as { 'traffic-split'?: { rules?: Array<{ weighted_upstreams?: Array<{ upstream_id?: unknown }> }> } } | undefined)?.['traffic-split']?.rules;
  if (!Array.isArray(rules)) return false;
  return rules.some((r) => Array.isArray(r.weighted_upstreams) && r.weighted_upstreams.some((u) => u.upstream_id !== undefined && String(u.upstream_id) === id));
}

/** APISIX's order: routes, services (also by upstream_id), then plugin configs, consumers, consumer groups, global rules (plugins only). */
const REFERRERS: Array<[dir: string, kind: string, byUpstreamId: boolean]> = [
  ['routes', 'route', true], ['services', 'service', true], ['plugin_configs', 'plugin_config', false],
  ['consumers', 'consumer', false], ['consumer_groups', 'consumer_group', false], ['global_rules', 'global_rules', false],
];

async function referrer(ctx: AdminContext, id: string): Promise<string | undefined> {
  for (const [dir, kind, byUpstreamId] of REFERRERS) {
    const { kvs } = await ctx.store.list(`${ctx.settings.keyPrefix}/${dir}/`);
    for (const kv of kvs) {
      if (kv.key.endsWith('/') || kv.key.includes('/credentials/')) continue;
      const v = JSON.parse(kv.value) as Conf;
      const name = String(v.id ?? v.username ?? kv.key.slice(kv.key.lastIndexOf('/') + 1));
      if (usedByTrafficSplit(v.plugins, id)) return `can not delete this upstream, plugin in ${kind} [${name}] is still using it now`;
      if (byUpstreamId && v.upstream_id !== undefined && String(v.upstream_id) === id) return `can not delete this upstream, ${kind} [${name}] is still using it now`;
    }
  }
  return undefined;
}

export const upstreams = defineResource({
  name: 'upstreams', kind: 'upstream', schema: upstreamSchema,
  check: (conf, ctx) => checkUpstream(conf, ctx),
  encrypt: (conf, keyring) => encryptUpstreamKey(conf, keyring),
  deleteCheck: (id, ctx) => referrer(ctx, id),
});

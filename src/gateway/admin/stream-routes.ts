/** /stream_routes (apisix/admin/stream_routes.lua): only when proxy_mode includes stream (checked by the dispatcher). */
import { streamRouteSchema } from '../schema/resources.ts';
import type { AdminContext } from './context.ts';
import { defineResource } from './resource.ts';
import type { Conf } from './resource.ts';
import { mustExist } from './references.ts';
import { checkUpstream, encryptUpstreamKey } from './upstream-check.ts';

/** APISIX's default `stream_plugins` (conf/config.yaml.example): the names a stream route may carry. */
const STREAM_PLUGINS = ['ip-restriction', 'limit-conn', 'mqtt-proxy', 'syslog'];

/** apisix/plugin.lua stream_check_schema: unknown names refused; the confs of plugins Gatehouse has checked with their schema. */
function checkStreamPlugins(ctx: AdminContext, plugins: unknown): string | undefined {
  if (!plugins || typeof plugins !== 'object') return undefined;
  for (const [name, conf] of Object.entries(plugins as Conf)) {
    if (!STREAM_PLUGINS.includes(name)) return `unknown plugin [${name}]`;
    if (ctx.plugins.get(name)) {
      const err = ctx.plugins.check({ [name]: conf }, 'route');
      if (err) return err;
    }
  }
  return undefined;
}

/** A subordinate route (protocol.superior_id) needs its superior, of the same protocol, and not itself. */
async function checkSuperior(ctx: AdminContext, conf: Conf, id: string | undefined): Promise<string | undefined> {
  const protocol = conf.protocol as { name?: string; superior_id?: unknown } | undefined;
  if (protocol?.superior_id === undefined || ctx.skipReferences) return undefined;
  const sid = String(protocol.superior_id);
  if (id !== undefined && sid === String(id)) return 'stream route can not set itself as superior_id';
  const kv = await ctx.store.get(`${ctx.settings.keyPrefix}/stream_routes/${sid}`);
  if (!kv) return `failed to fetch stream routes[${sid}], response code: 404`;
  const superior = JSON.parse(kv.value) as Conf;
  const theirs = (superior.protocol as { name?: string } | undefined)?.name;
  if (superior.protocol && theirs !== protocol.name) {
    return `protocol mismatch: subordinate protocol [${protocol.name}] does not match superior protocol [${theirs}]`;
  }
  return undefined;
}

export const streamRoutes = defineResource({
  name: 'stream_routes', kind: 'stream route', schema: streamRouteSchema,
  encrypt: (conf, keyring) => encryptUpstreamKey(conf.upstream, keyring),
  unsupported: ['patch'],
  filterFields: ['service_id', 'upstream_id'],
  async check(conf, ctx, id) {
    if (conf.upstream) {
      const err = await checkUpstream(conf.upstream as Record<string, unknown>, ctx);
      if (err) return err;
    }
    return await mustExist(ctx, 'upstreams', 'upstream', conf.upstream_id)
      ?? await mustExist(ctx, 'services', 'service', conf.service_id)
      ?? await checkSuperior(ctx, conf, id)
      ?? checkStreamPlugins(ctx, conf.plugins);
  },
  async deleteCheck(id, ctx) {
    const { kvs } = await ctx.store.list(`${ctx.settings.keyPrefix}/stream_routes/`);
    for (const kv of kvs) {
      if (kv.key.endsWith('/')) continue;
      const v = JSON.parse(kv.value) as Conf;
      const p = v.protocol as { superior_id?: unknown } | undefined;
      if (p?.superior_id !== undefined && String(p.superior_id) === id) {
        return `can not delete this stream route directly, stream route [${String(v.id)}] is still using it as superior_id`;
      }
    }
    return undefined;
  },
});

/** /stream_routes (apisix/admin/stream_routes.lua): only when proxy_mode includes stream (checked by the dispatcher). */
import { streamRouteSchema } from '../schema/resources.ts';
import { defineResource } from './resource.ts';
import { mustExist } from './references.ts';
import { checkUpstream, encryptUpstreamKey } from './upstream-check.ts';

export const streamRoutes = defineResource({
  name: 'stream_routes', kind: 'stream route', schema: streamRouteSchema,
  encrypt: (conf, keyring) => encryptUpstreamKey(conf.upstream, keyring),
  unsupported: ['patch'],
  filterFields: ['service_id', 'upstream_id'],
  async check(conf, ctx) {
    if (conf.upstream) {
      const err = await checkUpstream(conf.upstream as Record<string, unknown>, ctx);
      if (err) return err;
    }
    return await mustExist(ctx, 'upstreams', 'upstream', conf.upstream_id)
      ?? await mustExist(ctx, 'services', 'service', conf.service_id);
  },
});

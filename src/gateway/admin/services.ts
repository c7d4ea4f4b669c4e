/** /services (apisix/admin/services.lua). */
import { serviceSchema } from '../schema/resources.ts';
import { defineResource } from './resource.ts';
import { checkPlugins, firstReferrer, mustExist } from './references.ts';
import { checkUpstream, encryptUpstreamKey } from './upstream-check.ts';

export const services = defineResource({
  name: 'services', kind: 'service', schema: serviceSchema,
  encrypt: (conf, keyring) => encryptUpstreamKey(conf.upstream, keyring),
  async check(conf, ctx) {
    if (conf.upstream) {
      const err = await checkUpstream(conf.upstream as Record<string, unknown>, ctx);
      if (err) return err;
    }
    return await mustExist(ctx, 'upstreams', 'upstream', conf.upstream_id) ?? await checkPlugins(ctx, conf.plugins);
  },
  async deleteCheck(id, ctx) {
    const who = await firstReferrer(ctx, [['routes', 'route'], ['stream_routes', 'stream_route']], 'service_id', id);
    return who && `can not delete this service directly, ${who} is still using it now`;
  },
});

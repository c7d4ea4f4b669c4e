/** /upstreams (apisix/admin/upstreams.lua). */
import { upstreamSchema } from '../schema/resources.ts';
import { defineResource } from './resource.ts';
import { firstReferrer } from './references.ts';
import { checkUpstream, encryptUpstreamKey } from './upstream-check.ts';

export const upstreams = defineResource({
  name: 'upstreams', kind: 'upstream', schema: upstreamSchema,
  check: (conf, ctx) => checkUpstream(conf, ctx),
  encrypt: (conf, keyring) => encryptUpstreamKey(conf, keyring),
  async deleteCheck(id, ctx) {
    const who = await firstReferrer(ctx, [['routes', 'route'], ['services', 'service']], 'upstream_id', id);
    return who && `can not delete this upstream, ${who} is still using it now`;
  },
});

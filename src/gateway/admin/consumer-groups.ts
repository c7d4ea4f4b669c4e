/** /consumer_groups (apisix/admin/consumer_group.lua). */
import { consumerGroupSchema } from '../schema/resources.ts';
import { defineResource } from './resource.ts';
import { checkPlugins, firstReferrer } from './references.ts';

export const consumerGroups = defineResource({
  name: 'consumer_groups', kind: 'consumer group', schema: consumerGroupSchema,
  unsupported: ['post'],
  check: (conf, ctx) => checkPlugins(ctx, conf.plugins),
  async deleteCheck(id, ctx) {
    const who = await firstReferrer(ctx, [['consumers', 'consumer']], 'group_id', id);
    return who && `can not delete this consumer group, ${who} is still using it now`;
  },
});

/** /consumers/{username} (apisix/admin/consumers.lua): the username is the identity; deleting one deletes its credentials. */
import { consumerSchema } from '../schema/resources.ts';
import { defineResource } from './resource.ts';
import { duplicateKey } from './consumer-keys.ts';

export const consumers = defineResource({
  name: 'consumers', kind: 'consumer', schema: consumerSchema,
  noId: true,
  unsupported: ['post', 'patch'],
  pluginType: 'consumer',
  identity: (conf) => conf.username as string,
  listed: (kv) => !kv.key.includes('/credentials/'),
  async check(conf, ctx, id) {
    if (id !== undefined && id !== conf.username) return 'wrong username';
    if (conf.plugins) {
      const err = ctx.plugins.check(conf.plugins as Record<string, unknown>, 'consumer');
      if (err) return `invalid plugins configuration: ${err}`;
      const dup = await duplicateKey(ctx, conf.plugins as Record<string, unknown>, conf.username as string);
      if (dup) return dup;
    }
    if (conf.group_id !== undefined && !ctx.skipReferences && !await ctx.store.get(`${ctx.settings.keyPrefix}/consumer_groups/${conf.group_id}`)) {
      return `failed to fetch consumer group info by consumer group id [${conf.group_id}], response code: 404`;
    }
    return undefined;
  },
  async afterDelete(key, ctx) {
    await ctx.store.delete(`${key}/credentials/`, { prefix: true });
  },
});

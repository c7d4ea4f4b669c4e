/** /plugin_configs (apisix/admin/plugin_config.lua). */
import { pluginConfigSchema } from '../schema/resources.ts';
import { defineResource } from './resource.ts';
import { checkPlugins, firstReferrer } from './references.ts';

export const pluginConfigs = defineResource({
  name: 'plugin_configs', kind: 'plugin config', schema: pluginConfigSchema,
  unsupported: ['post'],
  check: (conf, ctx) => checkPlugins(ctx, conf.plugins),
  async deleteCheck(id, ctx) {
    const who = await firstReferrer(ctx, [['routes', 'route']], 'plugin_config_id', id);
    return who && `can not delete this plugin config, ${who} is still using it now`;
  },
});

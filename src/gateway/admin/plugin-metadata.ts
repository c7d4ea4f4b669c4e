/** /plugin_metadata/{plugin_name} (apisix/admin/plugin_metadata.lua): validated with the plugin's metadata schema. */
import { defineResource } from './resource.ts';

export const pluginMetadata = defineResource({
  name: 'plugin_metadata', kind: 'plugin_metadata', schema: { type: 'object' },
  noId: true,
  idInValue: true,
  unsupported: ['post', 'patch'],
  identity: (_conf, id) => id,
  preCheck(conf, id) {
    if (id === undefined) return 'missing plugin name';
    return undefined;
  },
  schemaFor: (id, ctx) => ctx.plugins.schemaOf(String(id), 'metadata') ?? { type: 'object' },
  check(conf, ctx, id) {
    return id !== undefined && ctx.plugins.get(id) ? undefined : 'invalid plugin name';
  },
});

/** /global_rules (apisix/admin/global_rules.lua): a plugin may appear in one global rule only. */
import { globalRuleSchema } from '../schema/resources.ts';
import { defineResource } from './resource.ts';
import { checkPlugins } from './references.ts';

export const globalRules = defineResource({
  name: 'global_rules', kind: 'global rule', schema: globalRuleSchema,
  unsupported: ['post'],
  async check(conf, ctx, id) {
    const err = await checkPlugins(ctx, conf.plugins);
    if (err) return err;
    const { kvs } = await ctx.store.list(`${ctx.settings.keyPrefix}/global_rules/`);
    for (const kv of kvs) {
      const other = JSON.parse(kv.value) as { id?: unknown; plugins?: Record<string, unknown> };
      if (String(other.id) === id) continue;
      for (const name of Object.keys(conf.plugins as Record<string, unknown>)) {
        if (other.plugins && name in other.plugins) return `plugin '${name}' already exists in global rule with id '${other.id}'`;
      }
    }
    return undefined;
  },
});

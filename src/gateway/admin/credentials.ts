/** /consumers/{username}/credentials/{id} (apisix/admin/credentials.lua): one auth plugin each; the consumer must exist. */
import { credentialSchema } from '../schema/resources.ts';
import { defineResource } from './resource.ts';
import { duplicateKey } from './consumer-keys.ts';

/** The URL's `jack/credentials/1` arrives as sub-path `jack/`: the consumer's name. */
const consumerOf = (subPath: string): string => subPath.split('/')[0];

export const credentials = defineResource({
  name: 'credentials', kind: 'credential', schema: credentialSchema,
  unsupported: ['post', 'patch'],
  pluginType: 'consumer',
  emptyListNotFound: true,
  keyOf: (id, subPath) => `/consumers/${consumerOf(subPath)}/credentials/${id}`,
  async check(conf, ctx, id, subPath) {
    if (!conf.plugins) return undefined;
    const plugins = conf.plugins as Record<string, unknown>;
    const err = ctx.plugins.check(plugins, 'consumer');
    if (err) return `invalid plugins configuration: ${err}`;
    for (const name of Object.keys(plugins)) {
      if (ctx.plugins.get(name)?.type !== 'auth') return 'only supports auth type plugins in consumer credential';
    }
    return duplicateKey(ctx, plugins, consumerOf(subPath), id);
  },
  async beforePut(key, ctx) {
    const consumerKey = key.slice(0, key.indexOf('/credentials/'));
    if (await ctx.store.get(consumerKey)) return undefined;
    return { status: 404, body: { error_msg: 'consumer not found' }, apiVersion: true };
  },
});

/**
 * The identifying value of an auth plugin (key-auth `key`, basic-auth
 * `username`) may belong to one consumer or credential only
 * (apisix/consumer.lua check_duplicate_key).
 */
import type { AdminContext } from './context.ts';

export async function duplicateKey(ctx: AdminContext, plugins: Record<string, unknown>, username: string, credentialId?: string): Promise<string | undefined> {
  const wanted: Array<[plugin: string, field: string, value: unknown]> = [];
  for (const [name, conf] of Object.entries(plugins)) {
    const field = ctx.plugins.get(name)?.consumerKeyField;
    const value = field && (conf as Record<string, unknown> | null)?.[field];
    if (field && value !== undefined) wanted.push([name, field, value]);
  }
  if (wanted.length === 0) return undefined;
  const base = `${ctx.settings.keyPrefix}/consumers/`;
  const { kvs } = await ctx.store.list(base);
  for (const kv of kvs) {
    const [owner, , credId] = kv.key.slice(base.length).split('/');
    if (credId === undefined ? owner === username && credentialId === undefined : owner === username && credId === credentialId) continue;
    const other = (JSON.parse(kv.value) as { plugins?: Record<string, Record<string, unknown>> }).plugins ?? {};
    for (const [plugin, field, value] of wanted) {
      let theirs = other[plugin]?.[field];
      // stored secrets are encrypted (data-encryption.ts)
      if (typeof theirs === 'string' && ctx.keyring && ctx.plugins.get(plugin)?.encryptFields?.includes(field)) theirs = ctx.keyring.decrypt(theirs) ?? theirs;
      if (theirs !== value) continue;
      const where = credId === undefined ? `consumer: ${owner}` : `credential: ${credId} of consumer: ${owner}`;
      return `duplicate ${field} of plugin ${plugin} found with ${where}`;
    }
  }
  return undefined;
}

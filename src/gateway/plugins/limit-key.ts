/**
 * The key limit-count and limit-req count by (their `key` and `key_type`):
 * a variable's value, `$a $b` combined (`var_combination`), or the text
 * itself (`constant`); an empty one is the client address, as APISIX's.
 */
import type { PluginContext } from './phase-api.ts';

export function limitKeyValue(conf: { key: string; key_type: string }, ctx: PluginContext): string {
  let key: string | undefined;
  if (conf.key_type === 'constant') key = conf.key;
  else if (conf.key_type === 'var_combination') key = conf.key.replace(/\$(\w+)/g, (_, v: string) => ctx.variable(v) ?? '');
  else key = ctx.variable(conf.key);
  return key === undefined || key === '' ? ctx.variable('remote_addr') ?? '' : key;
}

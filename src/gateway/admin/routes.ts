/** /routes (apisix/admin/routes.lua). */
import { routeSchema } from '../schema/resources.ts';
import { defineResource } from './resource.ts';
import { checkPlugins, mustExist } from './references.ts';
import { checkUpstream, encryptUpstreamKey } from './upstream-check.ts';
import { checkVars } from './vars-check.ts';
import { checkPostArgs } from './jsonpath-check.ts';
import { luaReady } from '../plugins/serverless.ts';

export const routes = defineResource({
  name: 'routes', kind: 'route', schema: routeSchema,
  encrypt: (conf, keyring) => encryptUpstreamKey(conf.upstream, keyring),
  filterFields: ['service_id', 'upstream_id'],
  preCheck(conf) {
    if (conf.host !== undefined && conf.hosts !== undefined) return 'only one of host or hosts is allowed';
    if (conf.remote_addr !== undefined && conf.remote_addrs !== undefined) return 'only one of remote_addr or remote_addrs is allowed';
    return undefined;
  },
  async check(conf, ctx) {
    if (conf.upstream) {
      const err = await checkUpstream(conf.upstream as Record<string, unknown>, ctx);
      if (err) return err;
    }
    return await mustExist(ctx, 'upstreams', 'upstream', conf.upstream_id)
      ?? await mustExist(ctx, 'services', 'service', conf.service_id)
      ?? await mustExist(ctx, 'plugin_configs', 'plugin config', conf.plugin_config_id)
      ?? await checkPlugins(ctx, conf.plugins)
      ?? checkVars(conf.vars)
      ?? postArgError(conf.vars)
      ?? await checkFilterFunc(conf.filter_func);
  },
});

/** APISIX loads `return <filter_func>` and wants a function (the message of Lua 5.4's parser, not LuaJIT's, after the prefix). */
async function checkFilterFunc(source: unknown): Promise<string | undefined> {
  if (typeof source !== 'string') return undefined;
  const l = await luaReady();
  return l?.checkFilter(source);
}

/** APISIX parses each `post_arg.` path of `vars` with the data plane's JSONPath library on write. */
function postArgError(vars: unknown): string | undefined {
  const err = checkPostArgs(vars);
  return err && `failed to validate the 'vars' expression: ${err}`;
}

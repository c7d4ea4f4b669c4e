/** The Admin API's collections by URL segment, as apisix/admin/init.lua registers them. */
import { consumerGroups } from './consumer-groups.ts';
import { consumers } from './consumers.ts';
import { credentials } from './credentials.ts';
import { globalRules } from './global-rules.ts';
import { pluginConfigs } from './plugin-configs.ts';
import { pluginMetadata } from './plugin-metadata.ts';
import { protos } from './protos.ts';
import type { Resource } from './resource.ts';
import { routes } from './routes.ts';
import { secrets } from './secrets.ts';
import { services } from './services.ts';
import { ssls } from './ssls.ts';
import { streamRoutes } from './stream-routes.ts';
import { upstreams } from './upstreams.ts';

export const resources: Record<string, Resource> = {
  routes, services, upstreams, consumers, credentials, ssls, global_rules: globalRules,
  plugin_configs: pluginConfigs, consumer_groups: consumerGroups, stream_routes: streamRoutes,
  plugin_metadata: pluginMetadata, secrets, protos,
};

/** `/schema/{name}`: the resource schemas by APISIX's names. */
export const schemaNames: Record<string, string> = {
  route: 'routes', service: 'services', upstream: 'upstreams', consumer: 'consumers', credential: 'credentials',
  ssl: 'ssls', global_rule: 'global_rules', plugin_config: 'plugin_configs', consumer_group: 'consumer_groups',
  stream_route: 'stream_routes', proto: 'protos',
};

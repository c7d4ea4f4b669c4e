/**
 * The configuration a worker routes with, read from its follower's copy
 * (every key under the prefix): routes, services, upstreams, plugin
 * configs, global rules and consumers with their credentials, parsed once
 * per store revision. Secrets stored encrypted (key-auth `key`,
 * basic-auth `password`, http-logger `auth_header`) are decrypted here, as
 * APISIX decrypts them when it loads consumers and plugin confs.
 */
import type { Keyring } from '../data-encryption.ts';
import type { PluginRegistry } from '../plugins/registry.ts';
import type { KeyValue } from '../store/store.ts';

export type Plugins = Record<string, Record<string, unknown>>;

export interface UpstreamConf {
  id?: string;
  nodes?: Record<string, number> | Array<{ host: string; port?: number; weight: number; priority?: number }>;
  type?: string;
  hash_on?: string;
  key?: string;
  retries?: number;
  retry_timeout?: number;
  timeout?: { connect: number; send: number; read: number };
  scheme?: string;
  pass_host?: string;
  upstream_host?: string;
  /** Health checks (src/gateway/dataplane/health.ts reads them with their defaults). */
  checks?: { active?: Record<string, unknown>; passive?: Record<string, unknown> };
  keepalive_pool?: { size?: number; idle_timeout?: number; requests?: number };
  tls?: { client_cert?: string; client_key?: string; client_cert_id?: string | number; verify?: boolean };
}

export interface RouteConf {
  id: string;
  uri?: string;
  uris?: string[];
  host?: string;
  hosts?: string[];
  methods?: string[];
  remote_addr?: string;
  remote_addrs?: string[];
  vars?: unknown[];
  filter_func?: string;
  priority?: number;
  status?: number;
  enable_websocket?: boolean;
  plugins?: Plugins;
  plugin_config_id?: string | number;
  service_id?: string | number;
  upstream_id?: string | number;
  upstream?: UpstreamConf;
  timeout?: { connect: number; send: number; read: number };
}

export interface ServiceConf {
  id: string;
  plugins?: Plugins;
  upstream?: UpstreamConf;
  upstream_id?: string | number;
  hosts?: string[];
  enable_websocket?: boolean;
}

export interface Consumer {
  username: string;
  plugins: Plugins;
  /** The consumer's own auth confs, then each credential's (id, plugins). */
  credentials: Array<{ id: string | undefined; plugins: Plugins }>;
  customId?: string;
  /** The consumer group it belongs to (`group_id`). */
  groupId?: string;
  /**
   * The group's plugins under the consumer's own (what merges into the route
   * after authentication); undefined without a group; null when the group
   * does not exist (APISIX answers 503).
   */
  withGroup?: Plugins | null;
}

/** An SSL object (apisix/schema_def.lua ssl), its keys decrypted. */
export interface SslConf {
  id: string;
  type?: string;
  sni?: string;
  snis?: string[];
  /** Absent on an object whose certificate is ordered (`acme`) until it is issued. */
  cert: string;
  key: string;
  /** Gatehouse: the certificate comes from an ACME issuer (src/gateway/acme/). */
  acme?: { issuer: string; fallback?: string[]; key?: string; status?: Record<string, unknown> };
  certs?: string[];
  keys?: string[];
  client?: { ca: string; depth?: number; skip_mtls_uri_regex?: string[] };
  status?: number;
  ssl_protocols?: string[];
}

export interface StreamRouteConf {
  id: string;
  remote_addr?: string;
  server_addr?: string;
  server_port?: number;
  sni?: string;
  upstream?: UpstreamConf;
  upstream_id?: string | number;
  service_id?: string | number;
  protocol?: { superior_id?: string };
}

export interface ConfigView {
  revision: number;
  /** Routes in the order the store created them (radixtree's insertion order). */
  routes: RouteConf[];
  services: Map<string, ServiceConf>;
  upstreams: Map<string, UpstreamConf>;
  pluginConfigs: Map<string, { plugins: Plugins }>;
  globalRules: Array<{ id: string; plugins: Plugins }>;
  consumers: Map<string, Consumer>;
  /** SSL objects with the store revision of their last change (the newest wins a tie). */
  ssls: Array<{ conf: SslConf; revision: number }>;
  /** Stream routes in creation order. */
  streamRoutes: StreamRouteConf[];
  /** Plugin metadata by plugin name (cors' allow_origins). */
  pluginMetadata: Map<string, Record<string, unknown>>;
}

/**
 * Parsed values by the follower's key-value object (replaced when the key
 * changes): a new version parses only what changed, and objects that did
 * not change keep their identity (balancer state, compiled chains).
 */
const parsed = new WeakMap<KeyValue, Record<string, unknown> | null>();

function parse(kv: KeyValue, prepare: (v: Record<string, unknown>) => void): Record<string, unknown> | undefined {
  const had = parsed.get(kv);
  if (had !== undefined) return had ?? undefined;
  let v: Record<string, unknown> | null = null;
  try {
    const j = JSON.parse(kv.value) as unknown;
    if (j && typeof j === 'object' && !Array.isArray(j)) v = j as Record<string, unknown>;
  } catch { /* APISIX skips an item it cannot load */ }
  if (v) prepare(v);
  parsed.set(kv, v);
  return v ?? undefined;
}

export function readConfig(kvs: Iterable<KeyValue>, prefix: string, revision: number, plugins: PluginRegistry, keyring: Keyring | undefined): ConfigView {
  const view: ConfigView = {
    revision, routes: [], services: new Map(), upstreams: new Map(), pluginConfigs: new Map(), globalRules: [], consumers: new Map(), pluginMetadata: new Map(),
    ssls: [], streamRoutes: [],
  };
  // APISIX stores PEM keys encrypted (a PEM key starts with `---`); a key no keyring entry opens stays as stored
  const openKey = (k: unknown): unknown => (typeof k === 'string' && !k.startsWith('---') && !k.startsWith('$') && keyring ? keyring.decrypt(k) ?? k : k);
  const sorted = [...kvs].sort((a, b) => a.createRevision - b.createRevision);
  const creds: Array<[string, string, Record<string, unknown>]> = [];
  const groups = new Map<string, Record<string, unknown>>();
  const open = (p: unknown): void => {
    if (keyring) plugins.mapSecrets(p, 'consumer', (v) => keyring.decrypt(v));
  };
  for (const kv of sorted) {
    if (!kv.key.startsWith(prefix)) continue;
    const parts = kv.key.slice(prefix.length).split('/');
    if (parts.length < 2 || parts[1] === '') continue;
    const [dir, id] = parts;
    const v = parse(kv, (value) => {
      // the key names the object, whatever its value says (APISIX forces value.id)
      if (parts.length === 2) value.id = id;
      if (dir === 'consumers') open(value.plugins);
      // a route-level secret (http-logger's auth_header) is stored encrypted too
      else if (keyring && value.plugins) plugins.mapSecrets(value.plugins, 'route', (x) => keyring.decrypt(x));
      // an upstream's client key is stored encrypted too (apisix/upstream.lua encrypt_conf)
      const up = (dir === 'upstreams' ? value : value.upstream) as { tls?: { client_key?: unknown } } | undefined;
      if (up?.tls?.client_key !== undefined) up.tls.client_key = openKey(up.tls.client_key);
      if (dir === 'ssls') {
        value.key = openKey(value.key);
        if (Array.isArray(value.keys)) value.keys = value.keys.map(openKey);
      }
    });
    if (!v) continue;
    switch (dir) {
      case 'routes': view.routes.push(v as unknown as RouteConf); break;
      case 'services': view.services.set(id, v as unknown as ServiceConf); break;
      case 'upstreams': view.upstreams.set(id, v as unknown as UpstreamConf); break;
      case 'plugin_configs': view.pluginConfigs.set(id, v as unknown as { plugins: Plugins }); break;
      case 'ssls': if (parts.length === 2) view.ssls.push({ conf: v as unknown as SslConf, revision: kv.modRevision }); break;
      case 'stream_routes': if (parts.length === 2) view.streamRoutes.push(v as unknown as StreamRouteConf); break;
      case 'plugin_metadata': view.pluginMetadata.set(id, v); break;
      case 'consumer_groups': groups.set(id, v); break;
      case 'global_rules': view.globalRules.push({ id, plugins: (v.plugins ?? {}) as Plugins }); break;
      case 'consumers':
        if (parts.length === 2) {
          view.consumers.set(id, {
            username: String(v.username ?? id), plugins: (v.plugins ?? {}) as Plugins, credentials: [],
            customId: (v.labels as Record<string, string> | undefined)?.custom_id,
            groupId: v.group_id === undefined ? undefined : String(v.group_id),
          });
        } else if (parts.length === 4 && parts[2] === 'credentials') {
          creds.push([id, parts[3], v]);
        }
        break;
    }
  }
  for (const c of view.consumers.values()) {
    c.credentials.push({ id: undefined, plugins: c.plugins });
    if (c.groupId !== undefined) {
      const group = groups.get(c.groupId);
      c.withGroup = group ? { ...(group.plugins ?? {}) as Plugins, ...c.plugins } : null;
    }
  }
  for (const [user, credId, v] of creds) view.consumers.get(user)?.credentials.push({ id: credId, plugins: (v.plugins ?? {}) as Plugins });
  view.globalRules.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return view;
}

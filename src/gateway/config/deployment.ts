/**
 * config.yaml's `deployment` section: where the configuration is kept —
 * etcd, the embedded store, or (a data plane in standalone mode) an
 * apisix.yaml file — as APISIX's roles and config providers say.
 */
import path from 'node:path';
import { at, bool, ConfigError, seconds, str } from './yaml-values.ts';
import type { Obj } from './yaml-values.ts';

/** deployment.etcd (APISIX's keys and defaults, apisix/cli/config.lua). */
export interface EtcdConfig {
  /** URLs, `http://127.0.0.1:2379` by default. */
  hosts: string[];
  /** Seconds for one request (connect, send, answer). */
  timeout: number;
  /** Seconds a watch may stay silent before it is renewed from the last revision seen. */
  watchTimeout: number;
  user: string | undefined;
  password: string | undefined;
  tls: { cert: string | undefined; key: string | undefined; verify: boolean; sni: string | undefined };
  /** apisix.ssl.ssl_trusted_certificate: the CA bundle etcd's certificate is checked against. */
  trustedCa: string | undefined;
}

export function isDataPlane(root: Obj): boolean {
  return at(root, 'deployment.role') === 'data_plane';
}


/**
 * The role's `config_provider` chooses the store; without one, a
 * `deployment.etcd.host` list means etcd (APISIX's default provider) and
 * no etcd section means the embedded store (Gatehouse's default).
 */
export function etcdOf(root: Obj): EtcdConfig | undefined {
  const role = str(at(root, 'deployment.role'), 'deployment.role', 'traditional');
  const providerKey = `deployment.role_${role}.config_provider`;
  const provider = at(root, providerKey);
  if (role === 'data_plane' && (provider === 'yaml' || provider === 'json')) return undefined;
  if (provider !== undefined && provider !== null && provider !== 'etcd' && provider !== 'embedded') {
    const later = provider === 'yaml' ? ' (standalone mode is deployment.role: data_plane with config_provider: yaml)' : '';
    throw new ConfigError(`${providerKey}: expected "etcd" or "embedded", got ${JSON.stringify(provider)}${later}`);
  }
  const hostRaw = at(root, 'deployment.etcd.host');
  if (provider === 'embedded' || (provider !== 'etcd' && (hostRaw === undefined || hostRaw === null))) return undefined;
  const hostList = hostRaw === undefined || hostRaw === null ? ['http://127.0.0.1:2379'] : Array.isArray(hostRaw) ? hostRaw : [hostRaw];
  const hosts = hostList.map((h, i) => {
    const key = Array.isArray(hostRaw) ? `deployment.etcd.host[${i + 1}]` : 'deployment.etcd.host';
    const v = str(h, key, '');
    let url: URL | undefined;
    try { url = new URL(v); } catch { url = undefined; }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.pathname !== '/') {
      throw new ConfigError(`${key}: expected an http:// or https:// URL, got ${JSON.stringify(v)}`);
    }
    return v.replace(/\/+$/, '');
  });
  if (hosts.length === 0) throw new ConfigError('deployment.etcd.host: expected at least one URL');
  const opt = (key: string): string | undefined => {
    const v = at(root, key);
    return v === undefined || v === null ? undefined : str(v, key, '');
  };
  const user = opt('deployment.etcd.user');
  if ((user === undefined) !== (opt('deployment.etcd.password') === undefined)) throw new ConfigError('deployment.etcd: user and password go together');
  if ((opt('deployment.etcd.tls.cert') === undefined) !== (opt('deployment.etcd.tls.key') === undefined)) throw new ConfigError('deployment.etcd.tls: cert and key go together');
  return {
    hosts,
    timeout: seconds(at(root, 'deployment.etcd.timeout'), 'deployment.etcd.timeout', 30),
    watchTimeout: seconds(at(root, 'deployment.etcd.watch_timeout'), 'deployment.etcd.watch_timeout', 50),
    user,
    password: opt('deployment.etcd.password'),
    tls: {
      cert: opt('deployment.etcd.tls.cert'),
      key: opt('deployment.etcd.tls.key'),
      verify: bool(at(root, 'deployment.etcd.tls.verify'), 'deployment.etcd.tls.verify', true),
      sni: opt('deployment.etcd.tls.sni'),
    },
    trustedCa: opt('apisix.ssl.ssl_trusted_certificate'),
  };
}

/**
 * Standalone mode (deployment.role: data_plane, config_provider yaml or
 * json): the file the configuration is read from, `apisix.yaml` or
 * `apisix.json` beside config.yaml, as APISIX's conf/ directory has them.
 */
export function standaloneOf(root: Obj, file: string): string | undefined {
  const role = str(at(root, 'deployment.role'), 'deployment.role', 'traditional');
  if (role !== 'traditional' && role !== 'data_plane' && role !== 'control_plane') {
    throw new ConfigError(`deployment.role: expected "traditional", "control_plane" or "data_plane", got ${JSON.stringify(role)}`);
  }
  if (role !== 'data_plane') return undefined;
  const provider = at(root, 'deployment.role_data_plane.config_provider');
  if (provider === 'yaml' || provider === 'json') return path.join(path.dirname(path.resolve(file)), `apisix.${provider}`);
  if (provider !== 'etcd') {
    throw new ConfigError(`deployment.role_data_plane.config_provider: expected "etcd", "yaml" or "json", got ${JSON.stringify(provider ?? null)}`);
  }
  return undefined;
}

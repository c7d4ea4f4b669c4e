/**
 * APISIX's conf/config.yaml as the gateway reads it: the keys it acts on,
 * APISIX's defaults (apisix/cli/config.lua) for those absent, and errors
 * that name the key (`apisix.node_listen[1].port: expected a port number
 * (1-65535), got "x"`). The first start replaces an empty admin key by a
 * random one and writes it back, as APISIX ≥ 3.10 does.
 */
import { nginxHttpOf } from './nginx-http-yaml.ts';
import type { NginxHttpYaml } from './nginx-http-yaml.ts';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { parseDocument } from 'yaml';
import type { Document } from 'yaml';
import { parseCidr } from '../../core/inet.ts';
import type { Cidr } from '../../core/inet.ts';
import { DEFAULT_KEYRING } from '../data-encryption.ts';
import { acmeOf } from './acme-yaml.ts';
import type { AcmeYaml } from './acme-yaml.ts';
import { etcdOf, isDataPlane, standaloneOf } from './deployment.ts';
import type { EtcdConfig } from './deployment.ts';
import { at, bool, ConfigError, isObj, listens, optionalStr, port, str } from './yaml-values.ts';
import type { Listen, Obj } from './yaml-values.ts';

export { ConfigError } from './yaml-values.ts';
export type { Listen } from './yaml-values.ts';
export type { EtcdConfig } from './deployment.ts';
export interface AdminKey { name?: string; key: string; role: string }

export interface GatewayConfig {
  file: string;
  nodeListen: Listen[];
  enableAdmin: boolean;
  proxyMode: string;
  /** apisix.router.http: `radixtree_host_uri` (APISIX's default) or `radixtree_uri`. */
  routerHttp: 'radixtree_host_uri' | 'radixtree_uri';
  serverTokens: boolean;
  admin: {
    listen: Listen;
    /** undefined: no `admin_key` list (every request is accepted). */
    keys: AdminKey[] | undefined;
    keyRequired: boolean;
    /** undefined: every address is allowed (`allow_admin: ~`). */
    allow: string[] | undefined;
    cors: boolean;
  };
  workerProcesses: string;
  errorLog: string;
  errorLogLevel: string;
  daemon: boolean;
  /** deployment.etcd.prefix, APISIX's `/apisix` becoming `/gateway`. */
  keyPrefix: string;
  /** apisix.data_encryption: the keyring, or undefined when enable_encrypt_fields is false. */
  keyring: string[] | undefined;
  /** deployment.etcd with an etcd config provider; undefined: the embedded store. */
  etcd: EtcdConfig | undefined;
  /** Standalone mode: the apisix.yaml (or .json) the configuration is read from. */
  standalone: string | undefined;
  /** nginx_config.envs: environment variables the workers keep (nginx's `env`), e.g. for `${{VAR}}` in apisix.yaml. */
  envs: string[];
  /** gatehouse.plugins_dir (Gatehouse's own): custom plugins in TypeScript or JavaScript, relative to the prefix. */
  pluginsDir: string | undefined;
  /** gatehouse.acme (Gatehouse's own): the ACME issuers SSL objects can name (src/gateway/config/acme-yaml.ts). */
  acme: AcmeYaml | undefined;
  /** apisix.trusted_addresses: the peers whose X-Forwarded-* are kept (undefined: not configured, none are). */
  trustedAddresses: Cidr[] | undefined;
  /** plugin_attr: each plugin's own section as written (APISIX's plugin.plugin_attr, e.g. redirect's https_port). */
  pluginAttr: Record<string, Obj>;
  /** plugin_attr.prometheus: where the metrics are exported (undefined address: no export server). */
  prometheus: { exportAddr: Listen | undefined; exportUri: string; metricPrefix: string };
  /** Keys generated at this start (printed once). */
  generated: AdminKey[];
  /** apisix.ssl: the TLS ports whose certificates are the SSL objects; undefined with `apisix.ssl.enable: false`. */
  ssl: SslListenConfig | undefined;
  /** apisix.enable_control + apisix.control: the control API's address (on by default at 127.0.0.1:9090, as APISIX's; undefined: off). */
  control: Listen | undefined;
  /** nginx_config.http.charset (APISIX's `charset` in nginx.conf, default utf-8). */
  charset: string;
  /** The rest of nginx_config.http and the configuration snippets (nginx-http-yaml.ts). */
  http: NginxHttpYaml;
  /** apisix.show_upstream_status_in_response_header: X-APISIX-Upstream-Status on every proxied answer, not only on 5xx. */
  showUpstreamStatus: boolean;
  /**
   * apisix.ssl.ssl_trusted_certificate: the CAs https nodes with `tls.verify` are checked against,
   * PEM text, or undefined for the system's (APISIX's `system`).
   */
  trustedCertificate: string | undefined;
  /** apisix.dns_resolver (`ip` or `ip:port`; undefined: /etc/resolv.conf's) and apisix.dns_resolver_valid (s), for node host names. */
  dnsResolver: string[] | undefined;
  dnsResolverValid: number | undefined;
  /** apisix.stream_proxy when proxy_mode includes stream; undefined otherwise. */
  stream: { tcp: StreamListen[]; udp: StreamListen[] } | undefined;
}

export interface SslListenConfig {
  listen: Listen[];
  /** The SNI assumed for clients that send none. */
  fallbackSni: string | undefined;
  /** apisix.ssl.ssl_protocols, the default for SSL objects without their own. */
  protocols: string[];
}

export interface StreamListen extends Listen { tls: boolean }

const LEVELS = ['debug', 'info', 'notice', 'warn', 'error', 'crit', 'alert', 'emerg'];
const PROXY_MODES = ['http', 'stream', 'http&stream'];

function randomKey(): string {
  const letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
  const bytes = crypto.randomBytes(32);
  return [...bytes].map((b) => letters[b % letters.length]).join('');
}

function adminKeys(doc: Document, raw: unknown, generated: AdminKey[]): AdminKey[] | undefined {
  const key = 'deployment.admin.admin_key';
  if (raw === undefined || raw === null) return undefined;
  if (!Array.isArray(raw)) throw new ConfigError(`${key}: expected a list of {name, key, role}`);
  return raw.map((row, i) => {
    const k = `${key}[${i + 1}]`;
    if (!isObj(row)) throw new ConfigError(`${k}: expected a mapping with name, key and role`);
    const role = str(row.role, `${k}.role`, '');
    if (role !== 'admin' && role !== 'viewer') throw new ConfigError(`${k}.role: expected "admin" or "viewer", got ${JSON.stringify(row.role ?? null)}`);
    let value = row.key === null || row.key === undefined ? '' : str(row.key, `${k}.key`, '');
    if (value === '' && role === 'admin') {
      value = randomKey();
      doc.setIn(['deployment', 'admin', 'admin_key', i, 'key'], value);
      generated.push({ name: row.name as string | undefined, key: value, role });
    }
    return { name: row.name === undefined ? undefined : String(row.name), key: value, role };
  });
}

/** Reads and checks `file`; writes generated admin keys back into it when `writeBack`. */
/** The control API: on by default at 127.0.0.1:9090, as APISIX's; `apisix.enable_control: false` turns it off. */
function controlOf(root: Obj): Listen | undefined {
  if (!bool(at(root, 'apisix.enable_control'), 'apisix.enable_control', true)) return undefined;
  const c = at(root, 'apisix.control');
  if (c !== undefined && c !== null && !isObj(c)) throw new ConfigError('apisix.control: expected a mapping with ip and port');
  return {
    ip: c?.ip === undefined ? '127.0.0.1' : str(c.ip, 'apisix.control.ip', ''),
    port: c?.port === undefined ? 9090 : port(c.port, 'apisix.control.port'),
  };
}

/** apisix.dns_resolver / dns_resolver_valid. */
function dnsOf(root: Obj): Pick<GatewayConfig, 'dnsResolver' | 'dnsResolverValid'> {
  const list = at(root, 'apisix.dns_resolver');
  if (list !== undefined && list !== null && !Array.isArray(list)) throw new ConfigError('apisix.dns_resolver: expected a list of addresses');
  const valid = at(root, 'apisix.dns_resolver_valid');
  if (valid !== undefined && valid !== null && typeof valid !== 'number') throw new ConfigError('apisix.dns_resolver_valid: expected a number of seconds');
  return {
    dnsResolver: Array.isArray(list) ? list.map((a, i) => str(a, `apisix.dns_resolver[${i + 1}]`, '')) : undefined,
    dnsResolverValid: typeof valid === 'number' ? valid : undefined,
  };
}

export function loadGatewayConfig(file: string, writeBack: boolean): GatewayConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read ${file}: ${(e as Error).message}`);
  }
  const doc = parseDocument(text);
  if (doc.errors.length > 0) throw new ConfigError(`${file}: ${doc.errors[0].message.split('\n')[0]}`);
  const root = (doc.toJS() ?? {}) as unknown;
  if (!isObj(root)) throw new ConfigError(`${file}: expected a mapping at the top level`);
  try {
    const generated: AdminKey[] = [];
    const allowRaw = at(root, 'deployment.admin.allow_admin');
    const hasAllow = isObj(at(root, 'deployment.admin')) && 'allow_admin' in (at(root, 'deployment.admin') as Obj);
    let allow: string[] | undefined = ['127.0.0.0/24'];
    if (hasAllow && (allowRaw === null || allowRaw === undefined)) allow = undefined;
    else if (allowRaw !== undefined) {
      if (!Array.isArray(allowRaw)) throw new ConfigError('deployment.admin.allow_admin: expected a list of addresses or CIDRs');
      allow = allowRaw.map((a, i) => str(a, `deployment.admin.allow_admin[${i + 1}]`, ''));
    }
    const adminListen = at(root, 'deployment.admin.admin_listen') as Obj | undefined;
    const proxyMode = str(at(root, 'apisix.proxy_mode'), 'apisix.proxy_mode', 'http');
    if (!PROXY_MODES.includes(proxyMode)) throw new ConfigError(`apisix.proxy_mode: expected one of ${PROXY_MODES.join(', ')}, got ${JSON.stringify(proxyMode)}`);
    const level = str(at(root, 'nginx_config.error_log_level'), 'nginx_config.error_log_level', 'warn');
    if (!LEVELS.includes(level)) throw new ConfigError(`nginx_config.error_log_level: expected one of ${LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
    const workers = str(at(root, 'nginx_config.worker_processes'), 'nginx_config.worker_processes', 'auto');
    if (workers !== 'auto' && !/^[1-9]\d*$/.test(workers)) throw new ConfigError(`nginx_config.worker_processes: expected "auto" or a positive number, got ${JSON.stringify(workers)}`);
    const keyRequired = bool(at(root, 'deployment.admin.admin_key_required'), 'deployment.admin.admin_key_required', true);
    const keys = adminKeys(doc, at(root, 'deployment.admin.admin_key'), generated);
    const standalone = standaloneOf(root, file);
    // a data plane serves no Admin API (APISIX opens the admin port only in the other roles)
    const enableAdmin = bool(at(root, 'apisix.enable_admin'), 'apisix.enable_admin', true) && !standalone && !isDataPlane(root);
    const cfg: GatewayConfig = {
      file,
      nodeListen: listens(at(root, 'apisix.node_listen'), 'apisix.node_listen', 9080),
      enableAdmin,
      proxyMode,
      routerHttp: str(at(root, 'apisix.router.http'), 'apisix.router.http', 'radixtree_host_uri') === 'radixtree_uri' ? 'radixtree_uri' : 'radixtree_host_uri',
      serverTokens: bool(at(root, 'apisix.enable_server_tokens'), 'apisix.enable_server_tokens', true),
      admin: {
        listen: {
          ip: adminListen?.ip === undefined ? '0.0.0.0' : str(adminListen.ip, 'deployment.admin.admin_listen.ip', ''),
          port: adminListen?.port === undefined ? 9180 : port(adminListen.port, 'deployment.admin.admin_listen.port'),
        },
        keys, keyRequired, allow,
        cors: bool(at(root, 'deployment.admin.enable_admin_cors'), 'deployment.admin.enable_admin_cors', true),
      },
      workerProcesses: workers,
      errorLog: str(at(root, 'nginx_config.error_log'), 'nginx_config.error_log', 'logs/error.log'),
      errorLogLevel: level,
      daemon: bool(at(root, 'nginx_config.daemon'), 'nginx_config.daemon', false),
      keyPrefix: str(at(root, 'deployment.etcd.prefix'), 'deployment.etcd.prefix', '/gateway').replace(/\/+$/, ''),
      keyring: keyringOf(root),
      etcd: etcdOf(root),
      standalone,
      envs: envsOf(at(root, 'nginx_config.envs')),
      pluginsDir: optionalStr(at(root, 'gatehouse.plugins_dir'), 'gatehouse.plugins_dir'),
      acme: acmeOf(root),
      pluginAttr: pluginAttrOf(root),
      trustedAddresses: trustedAddressesOf(at(root, 'apisix.trusted_addresses')),
      prometheus: prometheusOf(root),
      generated,
      ssl: sslOf(root),
      stream: proxyMode === 'http' ? undefined : streamOf(root),
      ...dnsOf(root),
      control: controlOf(root),
      charset: str(at(root, 'nginx_config.http.charset'), 'nginx_config.http.charset', 'utf-8'),
      http: nginxHttpOf(root),
      showUpstreamStatus: bool(at(root, 'apisix.show_upstream_status_in_response_header'), 'apisix.show_upstream_status_in_response_header', false),
      trustedCertificate: trustedOf(root, file),
    };
    checkConsistency(cfg);
    if (writeBack && generated.length > 0) fs.writeFileSync(file, doc.toString());
    return cfg;
  } catch (e) {
    if (e instanceof ConfigError) throw new ConfigError(`${file}: ${e.message}`);
    throw e;
  }
}

function keyringOf(root: Obj): string[] | undefined {
  if (!bool(at(root, 'apisix.data_encryption.enable_encrypt_fields'), 'apisix.data_encryption.enable_encrypt_fields', true)) return undefined;
  const raw = at(root, 'apisix.data_encryption.keyring');
  if (raw === undefined || raw === null) return DEFAULT_KEYRING;
  const list = Array.isArray(raw) ? raw : [raw];
  return list.map((k, i) => {
    const key = Array.isArray(raw) ? `apisix.data_encryption.keyring[${i + 1}]` : 'apisix.data_encryption.keyring';
    const v = str(k, key, '');
    if (Buffer.byteLength(v) !== 16 && Buffer.byteLength(v) !== 32) throw new ConfigError(`${key}: expected 16 bytes (AES-128) or 32 bytes (AES-256), got ${Buffer.byteLength(v)}`);
    return v;
  });
}

function trustedAddressesOf(v: unknown): Cidr[] | undefined {
  const key = 'apisix.trusted_addresses';
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw new ConfigError(`${key}: expected a list of addresses or CIDRs`);
  return v.map((x, i) => {
    const cidr = typeof x === 'string' ? parseCidr(x) : undefined;
    if (!cidr) throw new ConfigError(`${key}[${i + 1}]: expected an address or a CIDR, got ${JSON.stringify(x)}`);
    return cidr;
  });
}

function pluginAttrOf(root: Obj): Record<string, Obj> {
  const raw = at(root, 'plugin_attr');
  if (raw === undefined || raw === null) return {};
  if (!isObj(raw)) throw new ConfigError('plugin_attr: expected a mapping of plugin names');
  return Object.fromEntries(Object.entries(raw).filter((e): e is [string, Obj] => isObj(e[1])));
}

/** plugin_attr.prometheus (APISIX's defaults: 127.0.0.1:9091, /apisix/prometheus/metrics, apisix_). */
function prometheusOf(root: Obj): GatewayConfig['prometheus'] {
  const k = 'plugin_attr.prometheus';
  const addr = at(root, `${k}.export_addr`);
  if (addr !== undefined && addr !== null && !isObj(addr)) throw new ConfigError(`${k}.export_addr: expected a mapping with ip and port`);
  const enabled = bool(at(root, `${k}.enable_export_server`), `${k}.enable_export_server`, true);
  return {
    exportAddr: enabled ? {
      ip: addr?.ip === undefined ? '127.0.0.1' : str(addr.ip, `${k}.export_addr.ip`, ''),
      port: addr?.port === undefined ? 9091 : port(addr.port, `${k}.export_addr.port`),
    } : undefined,
    exportUri: str(at(root, `${k}.export_uri`), `${k}.export_uri`, '/apisix/prometheus/metrics'),
    metricPrefix: str(at(root, `${k}.metric_prefix`), `${k}.metric_prefix`, 'apisix_'),
  };
}

function envsOf(v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new ConfigError('nginx_config.envs: expected a list of environment variable names');
  return v.map((e, i) => {
    if (typeof e !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*(=.*)?$/.test(e)) throw new ConfigError(`nginx_config.envs[${i + 1}]: expected an environment variable name, got ${JSON.stringify(e)}`);
    return e;
  });
}

const TLS_VERSIONS = ['TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'];

/** apisix.ssl: on by default on port 9443, as APISIX's; `enable: false` turns it off. */
function sslOf(root: Obj): SslListenConfig | undefined {
  if (!bool(at(root, 'apisix.ssl.enable'), 'apisix.ssl.enable', true)) return undefined;
  const protocols = str(at(root, 'apisix.ssl.ssl_protocols'), 'apisix.ssl.ssl_protocols', 'TLSv1.2 TLSv1.3').split(/\s+/).filter(Boolean);
  for (const p of protocols) if (!TLS_VERSIONS.includes(p)) throw new ConfigError(`apisix.ssl.ssl_protocols: unknown protocol ${JSON.stringify(p)}`);
  const fallback = at(root, 'apisix.ssl.fallback_sni');
  return {
    listen: listens(at(root, 'apisix.ssl.listen'), 'apisix.ssl.listen', 9443),
    fallbackSni: fallback === undefined || fallback === null ? undefined : str(fallback, 'apisix.ssl.fallback_sni', '').replace(/\.$/, '').toLowerCase(),
    protocols,
  };
}

/**
 * apisix.ssl.ssl_trusted_certificate: `system` (APISIX's default) or a path relative to the
 * prefix, or a comma-separated list of both, as APISIX ≥ 3.9 reads it; read at start-up.
 */
function trustedOf(root: Obj, file: string): string | undefined {
  const raw = str(at(root, 'apisix.ssl.ssl_trusted_certificate'), 'apisix.ssl.ssl_trusted_certificate', 'system');
  const parts = raw.split(',').map((p) => p.trim()).filter(Boolean);
  if (parts.every((p) => p === 'system')) return undefined;
  const prefix = path.dirname(path.dirname(path.resolve(file)));
  return parts.map((p) => {
    if (p === 'system') return tls.rootCertificates.join('\n');
    try {
      return fs.readFileSync(path.resolve(prefix, p), 'utf8');
    } catch (e) {
      throw new ConfigError(`apisix.ssl.ssl_trusted_certificate: cannot read ${p}: ${(e as Error).message}`);
    }
  }).join('\n');
}

/** A stream_proxy address: a port, `ip:port`, `[v6]:port`, or `{addr, tls}` (tcp). */
function streamAddr(v: unknown, key: string, tcp: boolean): StreamListen {
  let addr = v;
  let tls = false;
  if (isObj(v)) {
    if (!tcp) throw new ConfigError(`${key}: expected a port or "ip:port"`);
    addr = v.addr;
    tls = bool(v.tls, `${key}.tls`, false);
    key += '.addr';
  }
  if (typeof addr === 'number' || (typeof addr === 'string' && /^\d+$/.test(addr))) return { port: port(addr, key), tls };
  const m = typeof addr === 'string' ? /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(addr) : null;
  if (!m) throw new ConfigError(`${key}: expected a port or "ip:port", got ${JSON.stringify(addr)}`);
  return { ip: m[1].replace(/^\[|\]$/g, ''), port: port(m[2], key), tls };
}

function streamOf(root: Obj): { tcp: StreamListen[]; udp: StreamListen[] } | undefined {
  const list = (name: 'tcp' | 'udp'): StreamListen[] => {
    const key = `apisix.stream_proxy.${name}`;
    const raw = at(root, key);
    if (raw === undefined || raw === null) return [];
    if (!Array.isArray(raw)) throw new ConfigError(`${key}: expected a list`);
    return raw.map((item, i) => streamAddr(item, `${key}[${i + 1}]`, name === 'tcp'));
  };
  const tcp = list('tcp');
  const udp = list('udp');
  return tcp.length || udp.length ? { tcp, udp } : undefined;
}

/** APISIX's start-up refusals (apisix/cli/ops.lua). */
function checkConsistency(cfg: GatewayConfig): void {
  const a = cfg.admin;
  for (const l of cfg.nodeListen) {
    if (cfg.enableAdmin && l.port === a.listen.port) throw new ConfigError(`deployment.admin.admin_listen.port: admin port ${a.listen.port} conflicts with apisix.node_listen`);
  }
  const defaultAllow = a.allow !== undefined && a.allow.length === 1 && a.allow[0] === '127.0.0.0/24';
  if (cfg.enableAdmin && a.keyRequired && !defaultAllow && (a.keys === undefined || a.keys.length === 0)) {
    throw new ConfigError('deployment.admin.admin_key: missing valid Admin API token.');
  }
}

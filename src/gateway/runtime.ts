/**
 * The gateway in one worker: its store connection, its Admin API, and the
 * revision of configuration it has applied (for the data plane, issue 11,
 * and the status endpoint). Created per worker and per configuration cycle;
 * closed when the cycle retires.
 */
import { handleAdmin } from './admin/api.ts';
import type { AdminContext, AdminRequest, AdminResponse } from './admin/context.ts';
import type { AdminEndpoint } from './admin/http-adapter.ts';
import { loadGatewayConfig } from './config/config-yaml.ts';
import type { GatewayConfig } from './config/config-yaml.ts';
import { Keyring } from './data-encryption.ts';
import { builtinPlugins } from './plugins/index.ts';
import { PluginRegistry } from './plugins/registry.ts';
import type { GatewayPlugin } from './plugins/registry.ts';
import { loadCustomPlugins } from './plugins/custom.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { StatusChannel } from './status.ts';
import { WorkerPoll } from './worker-poll.ts';
import { renderMetrics, workerMetrics } from './dataplane/metrics.ts';
import type { MetricsSnapshot } from './dataplane/metrics.ts';
import { DataPlane } from './dataplane/request-path.ts';
import { EtcdStore } from './store/etcd.ts';
import { ConfigFollower } from './store/follower.ts';
import { SqliteStore } from './store/sqlite.ts';
import { StandaloneStore } from './store/standalone.ts';
import type { StandaloneCheck, StandaloneLog } from './store/standalone.ts';
import { resources } from './admin/index.ts';
import type { Store } from './store/store.ts';
import { configureNodeNames } from './dataplane/node-names.ts';
import { trustUpstreamCas } from './dataplane/balancer.ts';
import { setHealthLog } from './dataplane/health.ts';
import { setPluginLog } from './plugins/batch-processor.ts';
import { GATEHOUSE_VERSION } from '../core/version.ts';

/** The gateway's version (`Server: APISIX/<version>`, the metrics' `apisix_node_info`): Gatehouse's own. */
export const GATEWAY_VERSION = GATEHOUSE_VERSION;

export class GatewayRuntime implements AdminEndpoint {
  readonly config: GatewayConfig;
  readonly store: Store;
  readonly ctx: AdminContext;
  readonly cors: boolean;
  readonly serverHeader: string;
  /** This worker's copy of the configuration (what the data plane reads). */
  readonly follower: ConfigFollower;
  /** Routes proxied requests with the follower's configuration. */
  readonly dataPlane: DataPlane;
  private readonly status: StatusChannel;
  private readonly metricsPoll: WorkerPoll<MetricsSnapshot>;

  /** Reads config.yaml and the custom plugins it names, then builds the runtime. */
  static async create(configFile: string, storeFile: string, log: StandaloneLog): Promise<GatewayRuntime> {
    const config = loadGatewayConfig(configFile, false);
    const prefix = path.dirname(path.dirname(storeFile));
    const custom = config.pluginsDir === undefined ? []
      : await loadCustomPlugins(path.resolve(prefix, config.pluginsDir), builtinPlugins, (msg) => log.error(msg));
    return new GatewayRuntime(config, storeFile, log, custom);
  }

  /** `storeFile`: the embedded store, `<prefix>/data/gateway.sqlite`; with etcd, its directory keeps the snapshot. */
  constructor(config: GatewayConfig, storeFile: string, log: StandaloneLog, customPlugins: GatewayPlugin[] = []) {
    this.config = config;
    const dataDir = path.dirname(storeFile);
    this.store = this.config.standalone ? this.openStandalone(this.config.standalone, log)
      : this.config.etcd ? openEtcd(this.config, path.dirname(dataDir)) : new SqliteStore(storeFile);
    this.cors = this.config.admin.cors;
    this.serverHeader = this.config.serverTokens ? `APISIX/${GATEWAY_VERSION}` : 'APISIX';
    this.ctx = {
      store: this.store,
      plugins: new PluginRegistry([...builtinPlugins, ...customPlugins]),
      keyring: this.config.keyring && new Keyring(this.config.keyring),
      now: () => Math.floor(Date.now() / 1000),
      settings: {
        keyPrefix: this.config.keyPrefix,
        proxyMode: this.config.proxyMode,
        keyRequired: this.config.admin.keyRequired,
        keys: this.config.admin.keys,
        enableCors: this.config.admin.cors,
        serverHeader: this.serverHeader,
        acmeIssuers: [...(this.config.acme?.issuers.keys() ?? [])],
      },
    };
    let snapshot: string | undefined;
    if (this.config.etcd) {
      fs.mkdirSync(dataDir, { recursive: true });
      snapshot = path.join(dataDir, ETCD_SNAPSHOT);
    }
    this.follower = new ConfigFollower(this.store, this.config.keyPrefix + '/', snapshot);
    configureNodeNames(this.config.dnsResolver, this.config.dnsResolverValid);
    trustUpstreamCas(this.config.trustedCertificate);
    setHealthLog((msg) => log.warn(msg), this.config.keyPrefix + '/');
    setPluginLog(log);
    this.dataPlane = new DataPlane({
      follower: this.follower, prefix: this.config.keyPrefix + '/', registry: this.ctx.plugins, keyring: this.ctx.keyring,
      mode: this.config.routerHttp, serverHeader: this.serverHeader, showUpstreamStatus: this.config.showUpstreamStatus,
      localConf: {
        pluginAttr: this.config.pluginAttr, sslPorts: this.config.ssl?.listen.map((l) => l.port) ?? [],
        trustedAddresses: this.config.trustedAddresses,
      },
    });
    this.status = new StatusChannel(storeFile, () => this.follower.confirmedReport());
    this.metricsPoll = new WorkerPoll(`gatehouse-gateway-metrics:${storeFile}`, () => workerMetrics.snapshot());
  }

  /** Standalone mode: the file's items are checked as the Admin API checks a PUT (against the file itself). */
  private openStandalone(file: string, log: StandaloneLog): StandaloneStore {
    const check: StandaloneCheck = async (collection, id, item, view) => {
      const resource = resources[collection];
      if (!resource) return undefined;
      const ctx: AdminContext = { ...this.ctx, store: view };
      const { error } = await resource.checkConf(id, structuredClone(item), !resource.def.noId, ctx, true);
      return error;
    };
    return new StandaloneStore(file, this.config.keyPrefix + '/', check, log);
  }

  /** The store revision this worker's configuration is consistent with. */
  get revision(): number {
    return this.follower.revision;
  }

  /**
   * The status endpoint's answer: the store's revision and each worker's.
   * It answers with the store down too (`store_error`): the workers'
   * revisions are what an operator needs to see then.
   */
  async statusReport(): Promise<AdminResponse> {
    let revision: number | null = null;
    let storeError: string | undefined;
    try {
      revision = await this.store.revision();
    } catch (e) {
      storeError = (e as Error).message;
    }
    const workers = await this.status.ask(await this.follower.confirmedReport(), this.workerCount());
    const body: Record<string, unknown> = { store: this.store.kind, store_revision: revision, workers };
    if (storeError !== undefined) body.store_error = storeError;
    return { status: 200, body };
  }

  /** The prometheus export: every worker's counts summed (plugin_attr.prometheus). */
  async metricsReport(): Promise<string> {
    const answers = await this.metricsPoll.ask(workerMetrics.snapshot(), this.workerCount());
    return renderMetrics(this.config.prometheus.metricPrefix, answers.map((a) => a.answer), { hostname: os.hostname(), version: GATEWAY_VERSION });
  }

  private workerCount(): number {
    return this.config.workerProcesses === 'auto' ? os.availableParallelism() : Number(this.config.workerProcesses);
  }

  handle(req: AdminRequest): Promise<AdminResponse> {
    return handleAdmin(this.ctx, req);
  }

  close(): void {
    this.follower.close();
    this.status.close();
    this.metricsPoll.close();
    this.store.close();
  }
}

/** The last configuration seen in etcd, under the prefix's data directory: served when a start finds etcd down. */
export const ETCD_SNAPSHOT = 'etcd-snapshot.json';

/** deployment.etcd as the store's options; relative certificate paths start from the prefix. */
function openEtcd(config: GatewayConfig, prefix: string): EtcdStore {
  const e = config.etcd!;
  const file = (f: string | undefined): string | undefined => (f === undefined ? undefined : path.resolve(prefix, f));
  const secure = e.hosts.some((h) => h.startsWith('https:'));
  return new EtcdStore({
    hosts: e.hosts,
    prefix: config.keyPrefix,
    timeoutMs: e.timeout * 1000,
    watchTimeoutMs: e.watchTimeout * 1000,
    user: e.user,
    password: e.password,
    tls: secure ? { cert: file(e.tls.cert), key: file(e.tls.key), ca: file(e.trustedCa), verify: e.tls.verify, sni: e.tls.sni } : undefined,
  });
}

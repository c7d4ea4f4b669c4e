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
import os from 'node:os';
import { StatusChannel } from './status.ts';
import { SqliteStore } from './store/sqlite.ts';
import type { Store, Watcher } from './store/store.ts';

export const GATEWAY_VERSION = '0.1.0';

export class GatewayRuntime implements AdminEndpoint {
  readonly config: GatewayConfig;
  readonly store: Store;
  readonly ctx: AdminContext;
  readonly cors: boolean;
  readonly serverHeader: string;
  /** The last store revision this worker has seen (applied, once the data plane exists). */
  revision = 0;
  private watcher: Watcher | undefined;
  private readonly status: StatusChannel;

  constructor(configFile: string, storeFile: string) {
    this.config = loadGatewayConfig(configFile, false);
    this.store = new SqliteStore(storeFile);
    this.cors = this.config.admin.cors;
    this.serverHeader = this.config.serverTokens ? `APISIX/${GATEWAY_VERSION}` : 'APISIX';
    this.ctx = {
      store: this.store,
      plugins: new PluginRegistry(builtinPlugins),
      keyring: this.config.keyring && new Keyring(this.config.keyring),
      now: () => Math.floor(Date.now() / 1000),
      settings: {
        keyPrefix: this.config.keyPrefix,
        proxyMode: this.config.proxyMode,
        keyRequired: this.config.admin.keyRequired,
        keys: this.config.admin.keys,
        enableCors: this.config.admin.cors,
        serverHeader: this.serverHeader,
      },
    };
    this.status = new StatusChannel(storeFile, () => this.revision);
    this.follow(0);
  }

  /** The status endpoint's answer: the store's revision and each worker's. */
  async statusReport(): Promise<AdminResponse> {
    const revision = await this.store.revision();
    const n = this.config.workerProcesses === 'auto' ? os.availableParallelism() : Number(this.config.workerProcesses);
    const workers = await this.status.ask(this.revision, n);
    return { status: 200, body: { store: this.store.kind, store_revision: revision, workers } };
  }

  /** Follows every change from `from` on; after a compaction, starts again from a fresh listing. */
  private follow(from: number): void {
    this.watcher = this.store.watch(from, {
      events: (_events, revision) => { this.revision = revision; },
      compacted: () => {
        void this.store.list(this.config.keyPrefix + '/').then(({ revision }) => {
          this.revision = revision;
          this.follow(revision);
        });
      },
    });
  }

  handle(req: AdminRequest): Promise<AdminResponse> {
    return handleAdmin(this.ctx, req);
  }

  close(): void {
    this.watcher?.cancel();
    this.status.close();
    this.store.close();
  }
}

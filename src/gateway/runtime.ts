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
import { builtinPlugins } from './plugins/index.ts';
import { PluginRegistry } from './plugins/registry.ts';
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

  constructor(configFile: string, storeFile: string) {
    this.config = loadGatewayConfig(configFile, false);
    this.store = new SqliteStore(storeFile);
    this.cors = this.config.admin.cors;
    this.serverHeader = this.config.serverTokens ? `APISIX/${GATEWAY_VERSION}` : 'APISIX';
    this.ctx = {
      store: this.store,
      plugins: new PluginRegistry(builtinPlugins),
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
    this.follow(0);
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
    this.store.close();
  }
}

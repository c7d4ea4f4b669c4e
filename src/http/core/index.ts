/**
 * ngx_http_core_module: structure (http/server/location/listen/server_name),
 * settings (root, timeouts, limits, ...) and core variables, split over the
 * files of this folder. This object is what the module list registers.
 */
import { AddressServer } from '../address-server.ts';
import type { HttpModule } from '../http-conf.ts';
import { coreVariables } from './variables.ts';
import { httpSettingsDirectives } from './settings.ts';
import { typesDirectives } from './types.ts';
import { addHttpListeners, httpStructureDirectives } from './structure.ts';
import { httpConf } from '../http-conf.ts';

export const httpCoreModule: HttpModule = {
  name: 'ngx_http_core_module',
  directives: [...httpStructureDirectives, ...httpSettingsDirectives, ...typesDirectives],
  variables: coreVariables,
  initCycle: addHttpListeners,
  initWorker(cycle, worker) {
    const http = httpConf(cycle);
    if (!http) return;
    const servers: AddressServer[] = [];
    for (const addr of http.addresses.values()) {
      const s = new AddressServer(http, addr);
      servers.push(s);
      worker.onConnection(addr.spec.key, (socket) => s.accept(socket));
    }
    worker.onShutdown((graceful) => {
      for (const s of servers) {
        if (graceful) s.shutdown();
        else s.destroyAll();
      }
    });
  },
};

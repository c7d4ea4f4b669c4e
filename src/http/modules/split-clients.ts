/**
 * ngx_http_split_clients_module: `split_clients string $variable { ... }`
 * in the http block; the block is read and hashed by the core's
 * split_clients (src/core/split-clients.ts), shared with stream.
 */
import { Ctx } from '../../conf/directive.ts';
import { readSplitClients } from '../../core/split-clients.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';

export const splitClientsModule: HttpModule = {
  name: 'ngx_http_split_clients_module',
  directives: [
    { name: 'split_clients', contexts: Ctx.HTTP, args: 2, block: true, handler: (cf, node) => readSplitClients(cf, node, httpMainOf(cf).variables) },
  ],
};

/**
 * ngx_stream_split_clients_module: `split_clients string $variable { ... }`
 * in the stream block, read and hashed by the core's split_clients as in
 * http.
 */
import { Ctx } from '../../conf/directive.ts';
import { readSplitClients } from '../../core/split-clients.ts';
import { streamMainOf } from '../conf.ts';
import type { StreamModule } from '../conf.ts';

export const streamSplitClientsModule: StreamModule = {
  name: 'ngx_stream_split_clients_module',
  directives: [
    { name: 'split_clients', contexts: Ctx.STREAM, args: 2, block: true, handler: (cf, node) => readSplitClients(cf, node, streamMainOf(cf).variables) },
  ],
};

/**
 * ngx_stream_map_module: `map source $variable { ... }` in the stream
 * block. Maps are read and matched exactly as in http (hostnames, volatile,
 * `~` regexes with captures, default), by the core's map (src/core/map-block.ts), with
 * the stream block's variables.
 */
import { Ctx } from '../../conf/directive.ts';
import { readMap } from '../../core/map-block.ts';
import { streamMainOf } from '../conf.ts';
import type { StreamModule } from '../conf.ts';

export const streamMapModule: StreamModule = {
  name: 'ngx_stream_map_module',
  directives: [
    { name: 'map', contexts: Ctx.STREAM, args: 2, block: true, handler: (cf, node) => readMap(cf, node, streamMainOf(cf).variables) },
    // nginx sizes its hash tables with these; a JavaScript Map needs no tuning
    { name: 'map_hash_max_size', contexts: Ctx.STREAM, args: 1, handler: () => undefined },
    { name: 'map_hash_bucket_size', contexts: Ctx.STREAM, args: 1, handler: () => undefined },
  ],
};

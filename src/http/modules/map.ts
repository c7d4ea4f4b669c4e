/**
 * ngx_http_map_module: `map source $variable { ... }` in the http block;
 * the block is read and matched by the core's map (src/core/map-block.ts),
 * shared with stream.
 */
import { Ctx } from '../../conf/directive.ts';
import { readMap } from '../../core/map-block.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';

export const mapModule: HttpModule = {
  name: 'ngx_http_map_module',
  directives: [
    { name: 'map', contexts: Ctx.HTTP, args: 2, block: true, handler: (cf, node) => readMap(cf, node, httpMainOf(cf).variables) },
    // nginx sizes its hash tables with these; a JavaScript Map needs no tuning
    { name: 'map_hash_max_size', contexts: Ctx.HTTP, args: 1, handler: () => undefined },
    { name: 'map_hash_bucket_size', contexts: Ctx.HTTP, args: 1, handler: () => undefined },
  ],
};

/**
 * ngx_stream_upstream_zone_module: `zone name [size]` in a stream
 * `upstream {}`: the peers' state (failures, session counts for
 * least_conn and max_conns) in shared memory, the same for every worker
 * thread; the upstream module places the group's peers there when the
 * block is read (UpstreamGroup.attachZone).
 */
import { Ctx } from '../../conf/directive.ts';
import { readZone } from '../../upstream/block-directives.ts';
import type { StreamModule } from '../conf.ts';
import { streamUpstreamGroupOf } from './upstream.ts';

export const streamUpstreamZoneModule: StreamModule = {
  name: 'ngx_stream_upstream_zone_module',
  directives: [{ name: 'zone', contexts: Ctx.STREAM_UPSTREAM, args: [1, 2], handler: (cf, node) => readZone(cf, streamUpstreamGroupOf(cf), node.args) }],
};

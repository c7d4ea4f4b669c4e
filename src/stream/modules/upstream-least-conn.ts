/**
 * ngx_stream_upstream_least_conn_module: `least_conn` in a stream `upstream {}`: the peer with the
 * fewest sessions for its weight, ties by round robin; the picker is the
 * one http's least_conn uses (src/upstream/balancers.ts).
 */
import { Ctx } from '../../conf/directive.ts';
import type { StreamModule } from '../conf.ts';
import { balancerDirective } from './upstream.ts';

export const streamUpstreamLeastConnModule: StreamModule = {
  name: 'ngx_stream_upstream_least_conn_module',
  directives: [{ name: 'least_conn', contexts: Ctx.STREAM_UPSTREAM, args: 0, handler: balancerDirective('least_conn') }],
};

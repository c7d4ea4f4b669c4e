/**
 * ngx_stream_upstream_random_module: `random [two [least_conn]]` in a stream `upstream {}`: a
 * random peer by weight, or the less busy of two; the picker is the one
 * http's random uses (src/upstream/balancers.ts).
 */
import { Ctx } from '../../conf/directive.ts';
import type { StreamModule } from '../conf.ts';
import { balancerDirective } from './upstream.ts';

export const streamUpstreamRandomModule: StreamModule = {
  name: 'ngx_stream_upstream_random_module',
  directives: [{ name: 'random', contexts: Ctx.STREAM_UPSTREAM, args: [0, 2], handler: balancerDirective('random') }],
};

/**
 * ngx_stream_upstream_hash_module: `hash key [consistent]` in a stream `upstream {}`: the
 * key (variables allowed, e.g. `$remote_addr`) picks the peer with nginx's
 * hash (compatible with Cache::Memcached) or, with `consistent`, its ketama
 * ring; the pickers are the ones http's hash uses (src/upstream/balancers.ts).
 */
import { Ctx } from '../../conf/directive.ts';
import type { StreamModule } from '../conf.ts';
import { balancerDirective } from './upstream.ts';

export const streamUpstreamHashModule: StreamModule = {
  name: 'ngx_stream_upstream_hash_module',
  directives: [{ name: 'hash', contexts: Ctx.STREAM_UPSTREAM, args: [1, 2], handler: balancerDirective('hash') }],
};

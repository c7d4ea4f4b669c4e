/**
 * ngx_http_gateway_module: the internal directives of the configuration
 * `gatehouse gateway` builds from APISIX's config.yaml (see `-T`):
 * `gateway_config <config.yaml>` and `gateway_store <file>` (http) give
 * each worker its gateway runtime (src/gateway/runtime.ts); `gateway_admin`
 * (location) answers with the Admin API, `gateway_status` (location) with
 * the store's revision and each worker's.
 */
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import { fullName } from '../../conf/parser.ts';
import { setting } from '../../conf/setters.ts';
import { Cycle } from '../../core/cycle.ts';
import type { serveAdmin, serveStatus } from '../../gateway/admin/http-adapter.ts';
import type { GatewayRuntime } from '../../gateway/runtime.ts';
import type { HttpModule, LocationConf } from '../http-conf.ts';

interface GatewayMain { config?: string; store?: string }

const mains = new WeakMap<Cycle, GatewayMain>();
/** A worker's gateway, loaded only where a configuration has one (nginx configurations do not pay for it). */
interface Loaded { rt: GatewayRuntime; serve: typeof serveAdmin; status: typeof serveStatus }
const runtimes = new WeakMap<Cycle, Loaded>();

function mainOf(cycle: Cycle): GatewayMain {
  let m = mains.get(cycle);
  if (!m) mains.set(cycle, (m = {}));
  return m;
}

/** Makes the location's content handler the loaded runtime's `serve` (Admin API) or `status` page. */
function answerWith(cf: ConfContext, what: 'serve' | 'status'): void {
  const cycle = Cycle.of(cf);
  (cf.data.location as LocationConf).contentHandler = (r) => {
    const loaded = runtimes.get(cycle);
    return loaded ? loaded[what](r, loaded.rt) : 500;
  };
}

export const gatewayModule: HttpModule = {
  name: 'ngx_http_gateway_module',
  directives: [
    {
      name: 'gateway_config', contexts: Ctx.HTTP, args: 1,
      handler: setting<GatewayMain, 'config'>((cf) => mainOf(Cycle.of(cf)), 'config', (cf, value) => fullName(cf.paths.prefix, value)),
    },
    {
      name: 'gateway_store', contexts: Ctx.HTTP, args: 1,
      handler: setting<GatewayMain, 'store'>((cf) => mainOf(Cycle.of(cf)), 'store', (cf, value) => fullName(cf.paths.prefix, value)),
    },
    {
      name: 'gateway_admin', contexts: Ctx.LOCATION, args: 0,
      handler: (cf) => answerWith(cf, 'serve'),
    },
    {
      name: 'gateway_status', contexts: Ctx.LOCATION, args: 0,
      handler: (cf) => answerWith(cf, 'status'),
    },
  ],
  initConf(cycle) {
    const m = mains.get(cycle);
    if (m && (m.config === undefined || m.store === undefined)) {
      throw new ConfError('"gateway_config" and "gateway_store" go together');
    }
  },
  async initWorker(cycle, worker) {
    const m = mains.get(cycle);
    if (!m?.config || !m.store) return;
    const [{ GatewayRuntime }, { serveAdmin, serveStatus }] = await Promise.all([
      import('../../gateway/runtime.ts'), import('../../gateway/admin/http-adapter.ts'),
    ]);
    const rt = new GatewayRuntime(m.config, m.store);
    runtimes.set(cycle, { rt, serve: serveAdmin, status: serveStatus });
    worker.onClose(() => rt.close());
  },
};

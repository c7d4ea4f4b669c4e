/**
 * ngx_http_gateway_module: the internal directives of the configuration
 * `gatehouse gateway` builds from APISIX's config.yaml (see `-T`):
 * `gateway_config <config.yaml>` and `gateway_store <file>` (http) give
 * each worker its gateway runtime (src/gateway/runtime.ts); `gateway_admin`
 * (location) answers with the Admin API, `gateway_status` (location) with
 * the store's revision and each worker's; `gateway_route` (location) runs
 * the data plane in the access phase (router, plugins, upstream choice,
 * src/gateway/dataplane/) and its header and body filters, and the
 * `$gateway_upstream_*` variables tell proxy_pass where the route goes
 * (APISIX's `$upstream_scheme`, `$upstream_host`, `$upstream_uri`...).
 * `gateway_ssl` (server) makes the server's TLS certificates the SSL
 * objects, chosen by SNI at each handshake (src/gateway/dataplane/certificates.ts),
 * and its requests checked for client certificates before routing.
 */
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import { fullName } from '../../conf/parser.ts';
import { setting } from '../../conf/setters.ts';
import { Cycle } from '../../core/cycle.ts';
import type { serveAdmin, serveMetrics, serveStatus } from '../../gateway/admin/http-adapter.ts';
import type { serveControl } from '../../gateway/dataplane/control.ts';
import type { GatewayRuntime } from '../../gateway/runtime.ts';
import { joinBodyFilter, nextBodyFilter } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import { DECLINED, DONE } from '../http-conf.ts';
import { useGzip } from './gzip.ts';
import { useBrotli } from './brotli/filter.ts';
import type { GatewayLua } from './lua/gateway-functions.ts';
import { coreSettings } from '../../core/modules/core.ts';
import type { HttpModule, HttpVariable, LocationConf } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import type { GatewayRequestState } from '../../gateway/dataplane/request-path.ts';
import { declareCounters } from '../../gateway/dataplane/counters.ts';
import { workerMetrics } from '../../gateway/dataplane/metrics.ts';
import { setCycleRuntime } from '../../gateway/workers.ts';
import type { chooseCertificate, httpsClientError } from '../../gateway/dataplane/certificates.ts';
import { requestLog } from '../request-log.ts';
import { certificateChoosers } from './ssl/handshake.ts';
import { pageTails } from '../special-response.ts';
import type { ServerConf } from '../http-conf.ts';
import { httpConf } from '../http-conf.ts';
import type { WorkerRuntime } from '../../core/cycle.ts';
import { acmeIssuers } from './acme/index.ts';
import os from 'node:os';
import path from 'node:path';

interface GatewayMain { config?: string; store?: string }

const mains = new WeakMap<Cycle, GatewayMain>();
/** A worker's gateway, loaded only where a configuration has one (nginx configurations do not pay for it). */
interface Loaded {
  rt: GatewayRuntime; serve: typeof serveAdmin; status: typeof serveStatus; metrics: typeof serveMetrics; control: typeof serveControl;
  choose: typeof chooseCertificate; clientError: typeof httpsClientError;
}
const runtimes = new WeakMap<Cycle, Loaded>();

function mainOf(cycle: Cycle): GatewayMain {
  let m = mains.get(cycle);
  if (!m) mains.set(cycle, (m = {}));
  return m;
}

/** Makes the location's content handler the loaded runtime's `serve` (Admin API), `status` page or `metrics` export. */
function answerWith(cf: ConfContext, what: 'serve' | 'status' | 'metrics'): void {
  const cycle = Cycle.of(cf);
  (cf.data.location as LocationConf).contentHandler = (r) => {
    const loaded = runtimes.get(cycle);
    return loaded ? loaded[what](r, loaded.rt) : 500;
  };
}

/** Locations whose requests the data plane routes, and the cycle whose runtime does it. */
const routeLocs = new WeakMap<LocationConf, Cycle>();
/** r.ctx key of the data plane's state for a request. */
const STATE = {};
/** r.ctx key of the body a plugin replaces the response's with. */
const REPLACED = {};
/** r.ctx key: a plugin's body filter ended the body. */
const ENDED = {};

function stateOf(r: HttpRequest): GatewayRequestState | undefined {
  return r.ctx.get(STATE) as GatewayRequestState | undefined;
}

function keepState(r: HttpRequest, s: GatewayRequestState): void {
  r.ctx.set(STATE, s);
}

function routeAccess(r: HttpRequest): number | Promise<number> {
  const cycle = routeLocs.get(r.loc);
  if (!cycle || r.parent) return DECLINED;
  const loaded = runtimes.get(cycle);
  if (!loaded) return 503;
  if (r.conn.tls) {
    // APISIX's verify_https_client, before routing
    const err = loaded.clientError(r, loaded.rt.dataPlane.current().view);
    if (err !== undefined) {
      requestLog(r).error(err);
      return 400;
    }
  }
  return loaded.rt.dataPlane.access(r, { declined: DECLINED, done: DONE }, keepState);
}

function routeHeaderFilter(r: HttpRequest, body: BodyFilterEntry): void {
  const s = stateOf(r);
  const cycle = routeLocs.get(r.loc);
  const loaded = cycle && runtimes.get(cycle);
  if (!s || !loaded) return;
  const dp = loaded.rt.dataPlane;
  dp.headerFilter(r, s);
  if (s.ctx.gzipLevel !== undefined) useGzip(r, s.ctx.gzipLevel);
  if (s.ctx.brotli !== undefined) useBrotli(r, s.ctx.brotli);
  const replaced = dp.replacementBody(s);
  // a HEAD answer has no body to filter, but a replaced one's head says what it would be
  if (r.method === 'HEAD' && replaced === undefined) return;
  if (replaced === undefined && !dp.filtersBody(s)) return;
  // the body changes: its length, validators and encoding go (APISIX's clear_header_as_body_modified),
  // Last-Modified also as the upstream sent it
  r.contentLength = undefined;
  r.lastModified = undefined;
  r.setHeader('Last-Modified', undefined);
  // brotli keeps the weak ETag it set (the same entity, encoded)
  if (replaced !== undefined || !s.bodyFilters?.every((l) => l.plugin.keepsEtag)) r.setHeader('ETag', undefined);
  if (replaced !== undefined) r.setHeader('Content-Encoding', undefined);
  if (r.method === 'HEAD') return;
  if (replaced !== undefined) r.ctx.set(REPLACED, replaced);
  joinBodyFilter(r, body);
}

/** A replaced body goes with the response's end (its own is dropped); else each piece through the plugins' body filters. */
function routeBodyFilter(r: HttpRequest, chunk: Buffer, eof: boolean, self: BodyFilterEntry): boolean {
  const replaced = r.ctx.get(REPLACED) as Buffer | undefined;
  if (replaced !== undefined) return eof ? nextBodyFilter(r, self, replaced, true) : true;
  const s = stateOf(r);
  const loaded = runtimes.get(routeLocs.get(r.loc)!);
  if (!s || !loaded || r.ctx.get(ENDED)) return true;
  const out = loaded.rt.dataPlane.filterBody(s, { chunk, eof });
  // a filter that ended the body early (ngx.arg[2] = true): what comes later is dropped
  if (out.eof && !eof) r.ctx.set(ENDED, true);
  return nextBodyFilter(r, self, out.chunk, out.eof);
}

/** Each cycle's Lua for the serverless functions, once a request or a check made it. */
const luas = new WeakMap<Cycle, { lua?: GatewayLua }>();

/** Hands the serverless plugins the worker's Lua: a VM of its own, made when one is first needed. */
async function provideLua(cycle: Cycle, worker: Parameters<NonNullable<HttpModule['initWorker']>>[1]): Promise<void> {
  const { provideLuaFunctions } = await import('../../gateway/plugins/serverless.ts');
  const held: { lua?: GatewayLua } = {};
  luas.set(cycle, held);
  provideLuaFunctions(async () => {
    const { createGatewayLua } = await import('./lua/gateway-functions.ts');
    held.lua = await createGatewayLua({
      workerId: worker.workerId, workerCount: coreSettings(cycle).workerProcesses, prefix: cycle.paths.prefix,
      onShutdown: (fn) => worker.onShutdown(fn), holdShutdown: (work) => worker.holdShutdown(work),
    });
    return held.lua;
  });
  worker.onClose(() => held.lua?.close());
}

function routeLog(r: HttpRequest): number {
  const s = stateOf(r);
  const cycle = routeLocs.get(r.loc);
  const loaded = cycle && runtimes.get(cycle);
  if (loaded) workerMetrics.requests++;
  if (s && loaded) {
    loaded.rt.dataPlane.log(s);
    // the request is over for the serverless functions' Lua too (its ngx.ctx, its cosockets)
    luas.get(cycle!)?.lua?.release(r);
  }
  return DECLINED;
}

function upstreamVar(pick: (s: GatewayRequestState) => string | undefined): (r: HttpRequest) => string | undefined {
  return (r) => {
    const s = stateOf(r);
    return s ? pick(s) : undefined;
  };
}

/** After the page's `<hr><center>gatehouse…</center>` line, where APISIX's runtime has `<center>openresty</center>`. */
const APISIX_PAGE_TAIL = '<p><em>Powered by <a href="https://apisix.apache.org/">APISIX</a>.</em></p></body>\r\n</html>\r\n';

const variables: HttpVariable[] = [
  { name: 'gateway_upstream_scheme', noCache: true, get: upstreamVar((s) => s.ctx.upstreamScheme) },
  { name: 'gateway_upstream_host', noCache: true, get: upstreamVar((s) => s.ctx.upstreamHost) },
  { name: 'gateway_upstream_uri', noCache: true, get: upstreamVar((s) => s.ctx.upstreamUri) },
  { name: 'gateway_upstream_method', noCache: true, get: (r) => stateOf(r)?.ctx.upstreamMethod ?? r.method },
  { name: 'gateway_upstream_upgrade', noCache: true, get: upstreamVar((s) => (s.ctx.websocket ? s.ctx.header('upgrade') : '')) },
  { name: 'gateway_upstream_connection', noCache: true, get: upstreamVar((s) => (s.ctx.websocket ? s.ctx.header('connection') : '')) },
];

/**
 * SSL objects with `acme` get their certificates from the issuers of
 * config.yaml's gatehouse.acme (the acme module's `acme_issuer` blocks in
 * the generated configuration): worker 0 of the node holding the store's
 * lease orders them (src/gateway/acme/).
 */
function startAcme(cycle: Cycle, worker: WorkerRuntime, rt: GatewayRuntime, storeFile: string): void {
  const http = httpConf(cycle);
  const acme = http && acmeIssuers(http);
  if (!acme || worker.workerId !== 0) return;
  if (rt.config.standalone) {
    worker.log.warn('acme: SSL objects cannot be given certificates in standalone mode (the configuration file is read-only)');
    return;
  }
  void import('../../gateway/acme/ssl-orders.ts').then(({ GatewayAcme }) => {
    const task = new GatewayAcme({
      store: rt.store, keyPrefix: rt.config.keyPrefix, keyring: rt.ctx.keyring, follower: rt.follower,
      view: () => rt.dataPlane.current().view, issuers: acme.issuers, doc: acme.doc, log: worker.log,
      node: `${os.hostname()}:${path.dirname(path.dirname(storeFile))}`,
    });
    task.start();
    worker.onShutdown(() => task.stop());
    worker.onClose(() => task.stop());
  });
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
    {
      // the server's TLS certificates are the SSL objects, chosen by SNI at each handshake
      name: 'gateway_ssl', contexts: Ctx.SERVER, args: 0,
      handler: (cf) => {
        const cycle = Cycle.of(cf);
        certificateChoosers.set(cf.data.server as ServerConf, (conn, hello) => {
          const loaded = runtimes.get(cycle);
          const ssl = loaded?.rt.config.ssl;
          if (!loaded || !ssl) return 'the gateway is not running in this worker';
          return loaded.choose(loaded.rt.dataPlane.current().view, ssl, conn, hello?.serverName);
        });
      },
    },
    {
      // APISIX's control API: /v1/healthcheck
      name: 'gateway_control', contexts: Ctx.LOCATION, args: 0,
      handler: (cf) => {
        const cycle = Cycle.of(cf);
        (cf.data.location as LocationConf).contentHandler = (r) => {
          const loaded = runtimes.get(cycle);
          if (!loaded) return 500;
          const rt = loaded.rt;
          return loaded.control(r, rt.dataPlane.current().view, rt.serverHeader);
        };
      },
    },
    {
      name: 'gateway_metrics', contexts: Ctx.LOCATION, args: 0,
      handler: (cf) => answerWith(cf, 'metrics'),
    },
    {
      name: 'gateway_route', contexts: Ctx.LOCATION, args: 0,
      handler: (cf) => {
        routeLocs.set(cf.data.location as LocationConf, Cycle.of(cf));
        // nginx's own pages of the proxy server (a 502 when every try failed, a 504...) end as APISIX's runtime ends them
        pageTails.set(cf.data.server as ServerConf, APISIX_PAGE_TAIL);
        declareCounters();
      },
    },
  ],
  variables,
  postconfiguration(http) {
    // after nginx's access (100) and auth_basic (200), as access_by_lua runs after them
    http.addPhaseHandler('ACCESS', 300, routeAccess);
    // before the access log (100): APISIX's log phase
    http.addPhaseHandler('LOG', 90, routeLog);
    // before gzip (1500): a replaced body is compressed too
    const body: BodyFilterEntry = http.addBodyFilter(1460, (r, chunk, eof) => routeBodyFilter(r, chunk, eof, body));
    http.addHeaderFilter(1460, (r) => routeHeaderFilter(r, body));
  },
  initConf(cycle) {
    const m = mains.get(cycle);
    if (m && (m.config === undefined || m.store === undefined)) {
      throw new ConfError('"gateway_config" and "gateway_store" go together');
    }
  },
  async initWorker(cycle, worker) {
    const m = mains.get(cycle);
    if (!m?.config || !m.store) return;
    const [{ GatewayRuntime }, { serveAdmin, serveStatus, serveMetrics }, { chooseCertificate, httpsClientError }, { serveControl }] = await Promise.all([
      import('../../gateway/runtime.ts'), import('../../gateway/admin/http-adapter.ts'), import('../../gateway/dataplane/certificates.ts'),
      import('../../gateway/dataplane/control.ts'),
    ]);
    await provideLua(cycle, worker);
    const rt = await GatewayRuntime.create(m.config, m.store, { error: (msg) => worker.log.error(msg), warn: (msg) => worker.log.warn(msg) });
    runtimes.set(cycle, {
      rt, serve: serveAdmin, status: serveStatus, metrics: serveMetrics, control: serveControl, choose: chooseCertificate, clientError: httpsClientError,
    });
    setCycleRuntime(cycle, rt);
    worker.onClose(() => rt.close());
    // the loggers' buffered entries go before the worker does, as APISIX's premature timers send them
    worker.onShutdown((graceful) => {
      if (graceful) worker.holdShutdown(import('../../gateway/plugins/batch-processor.ts').then((b) => b.flushAllBatches()));
    });
    startAcme(cycle, worker, rt, m.store);
  },
};

/**
 * APISIX's control API health view (apisix/control/v1.lua): `GET
 * /v1/healthcheck` lists every route, service and upstream of the
 * configuration whose upstream has `checks`, as `{name, type, nodes}` —
 * `name` its key in the store without the prefix (`/routes/1`), `type` the active check's, `nodes` each
 * target's address, state and counts, read from the workers' shared table
 * (present once a request used the upstream and so made its checker);
 * `/v1/healthcheck/{routes|services|upstreams|stream_routes}/{id}` shows one.
 */
import type { HttpRequest } from '../../http/request.ts';
import { DONE } from '../../http/http-conf.ts';
import { sendSimple } from '../../http/response.ts';
import type { ConfigView, UpstreamConf } from '../router/config-view.ts';
import { nodesOf } from './balancer.ts';
import { HealthChecker } from './health.ts';

interface Entry { name: string; type: string | undefined; nodes?: ReturnType<HealthChecker['report']>[] }

function entryOf(kind: string, id: string, u: UpstreamConf): Entry {
  const checker = new HealthChecker(`${kind}/${id}`, u, nodesOf(u));
  const checks = u.checks ?? {};
  const type = (checks.active?.type ?? checks.passive?.type ?? (checks.active ? 'http' : undefined)) as string | undefined;
  // the key without the store's prefix (`/routes/1`), fields in the order t/control/healthcheck.t shows
  const nodes = checker.registered() ? [...new Map([...checker.targets.values()].map((t) => [t.key, t])).values()].map((t) => checker.report(t)) : undefined;
  return nodes ? { name: `/${kind}s/${id}`, nodes, type } : { name: `/${kind}s/${id}`, type };
}

function sources(view: ConfigView, kind: string): Array<[string, UpstreamConf | undefined]> {
  if (kind === 'route') return view.routes.map((r) => [String(r.id), r.upstream]);
  if (kind === 'service') return [...view.services.values()].map((s) => [String(s.id), s.upstream]);
  if (kind === 'stream_route') return view.streamRoutes.map((r) => [String(r.id), r.upstream]);
  return [...view.upstreams.entries()].map(([id, u]) => [id, u]);
}

/** The answer to a control API request: status and JSON body. */
export function healthcheckView(view: ConfigView, uri: string): [number, unknown] {
  const segs = uri.split('/').filter(Boolean);
  if (segs[0] !== 'v1' || segs[1] !== 'healthcheck') return [404, { error_msg: 'not found' }];
  if (segs.length === 2) {
    const all: Entry[] = [];
    for (const kind of ['route', 'stream_route', 'service', 'upstream']) {
      for (const [id, u] of sources(view, kind)) if (u?.checks) all.push(entryOf(kind, id, u));
    }
    return [200, all];
  }
  const [, , srcType, srcId] = segs;
  if (!srcId) return [404, { error_msg: `missing src id for src type ${srcType}` }];
  const kind = ({ routes: 'route', services: 'service', upstreams: 'upstream', stream_routes: 'stream_route' } as Record<string, string>)[srcType];
  if (!kind) return [400, { error_msg: `invalid src type ${srcType}` }];
  const found = sources(view, kind).find(([id]) => id === srcId);
  if (!found) return [404, { error_msg: `${srcType}[${srcId}] not found` }];
  if (!found[1]?.checks) return [404, { error_msg: `no checker for ${srcType}[${srcId}]` }];
  return [200, entryOf(kind, srcId, found[1])];
}

/** The content handler of `gateway_control`. */
export async function serveControl(r: HttpRequest, view: ConfigView, serverHeader: string): Promise<number> {
  if (r.method !== 'GET' && r.method !== 'HEAD') return 405;
  const [status, body] = healthcheckView(view, r.uri);
  r.ownServer = true;
  r.addHeader('Server', serverHeader);
  await sendSimple(r, status, Buffer.from(JSON.stringify(body), 'utf8'), 'application/json');
  return DONE;
}

/**
 * prometheus (apisix/plugins/prometheus.lua, exporter.lua): in the log
 * phase, a request on a route (or global rule) with the plugin counts in
 * apisix_http_status, apisix_http_latency (request, upstream, apisix) and
 * apisix_bandwidth (ingress, egress), with APISIX's labels. The export
 * endpoint (plugin_attr.prometheus.export_addr, 127.0.0.1:9091 and
 * /apisix/prometheus/metrics by default) sums every worker's counts.
 */
import { LABEL_SEP as S, workerMetrics } from '../dataplane/metrics.ts';
import type { GatewayPlugin } from './registry.ts';

interface PrometheusConf { prefer_name: boolean }

/** The last of nginx's comma-separated per-try values (`0.002, 0.001` → 0.001); undefined for none or `-`. */
export function lastSeconds(v: string | undefined): number | undefined {
  if (!v) return undefined;
  // one try, the common case: no list to split
  const last = v.includes(',') || v.includes(':') ? v.split(/[,:]\s*/).pop()!.trim() : v;
  const n = Number(last);
  return last === '' || last === '-' || !Number.isFinite(n) ? undefined : n;
}

interface Keys { of: string[]; status: string; request: string; upstream: string; apisix: string; ingress: string; egress: string }

/**
 * The last label keys of each route's plugin configuration, reused while the
 * request's values are the same (the same strings: no concatenation, and
 * their hashes are already known to the metrics' maps).
 */
const lastKeys = new WeakMap<object, Keys>();

/** The label keys (metrics.ts LABEL_SEP) of [status, route, matched_uri, matched_host, service, consumer, node, response_source]. */
function keysFor(conf: object, of: string[]): Keys {
  const last = lastKeys.get(conf);
  if (last && last.of.every((v, i) => v === of[i])) return last;
  const [status, route, uri, host, service, consumer, node, source] = of;
  // route, service, consumer, node, request_type, request_llm_model, llm_model
  const common = `${S}${route}${S}${service}${S}${consumer}${S}${node}${S}traditional_http${S}${S}`;
  const k: Keys = {
    of,
    status: `${status}${S}${route}${S}${uri}${S}${host}${S}${service}${S}${consumer}${S}${node}${S}traditional_http${S}${S}${S}${source}`,
    request: 'request' + common, upstream: 'upstream' + common, apisix: 'apisix' + common, ingress: 'ingress' + common, egress: 'egress' + common,
  };
  lastKeys.set(conf, k);
  return k;
}

/** An address without its port and an IPv6 address's brackets (`127.0.0.1:80` → 127.0.0.1, `[::1]:80` → ::1). */
function hostOf(addr: string): string {
  let end = addr.length;
  let i = end - 1;
  while (i >= 0 && addr.charCodeAt(i) >= 48 && addr.charCodeAt(i) <= 57) i--;
  if (i >= 0 && i < end - 1 && addr[i] === ':') end = i;
  if (end > 0 && addr[end - 1] === ']') end--;
  return addr.slice(addr[0] === '[' ? 1 : 0, end);
}

export const prometheus: GatewayPlugin<PrometheusConf> = {
  name: 'prometheus', version: 0.2, priority: 500,
  schema: {
    type: 'object',
    properties: { prefer_name: { type: 'boolean', default: false } },
  },
  log(conf, ctx) {
    const route = ctx.route;
    let routeId = route?.id ?? '';
    const service = route?.conf.service_id === undefined ? '' : String(route.conf.service_id);
    // prefer_name: the route's name (the service keeps its id here)
    if (conf.prefer_name && route) routeId = (route.conf as { name?: string }).name ?? routeId;
    const consumer = ctx.consumer?.username ?? '';
    const upstreamAddr = ctx.variable('upstream_addr');
    const comma = upstreamAddr ? upstreamAddr.lastIndexOf(',') : -1;
    const lastAddr = !upstreamAddr ? '' : comma < 0 ? upstreamAddr : upstreamAddr.slice(comma + 1).trimStart();
    const node = lastAddr.startsWith('unix:') ? lastAddr : hostOf(lastAddr);
    const headerTime = ctx.variable('upstream_header_time');
    const source = ctx.answered ? 'apisix' : upstreamAddr ? (lastSeconds(headerTime) !== undefined ? 'upstream' : 'nginx') : 'apisix';
    const status = ctx.variable('status') ?? '';
    const k = keysFor(conf, [status, routeId, ctx.matchedUri, ctx.matchedHost, service, consumer, node, source]);
    workerMetrics.incKey('http_status', k.status, 1);
    const latency = (lastSeconds(ctx.variable('request_time')) ?? 0) * 1000;
    const upstream = lastSeconds(ctx.variable('upstream_response_time'));
    workerMetrics.observeKey('http_latency', k.request, latency);
    if (upstream !== undefined) workerMetrics.observeKey('http_latency', k.upstream, upstream * 1000);
    workerMetrics.observeKey('http_latency', k.apisix, Math.max(0, latency - (upstream ?? 0) * 1000));
    workerMetrics.incKey('bandwidth', k.ingress, Number(ctx.variable('request_length') ?? 0));
    workerMetrics.incKey('bandwidth', k.egress, Number(ctx.variable('bytes_sent') ?? 0));
  },
};

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
function lastSeconds(v: string | undefined): number | undefined {
  if (!v) return undefined;
  // one try, the common case: no list to split
  const last = v.includes(',') || v.includes(':') ? v.split(/[,:]\s*/).pop()!.trim() : v;
  const n = Number(last);
  return last === '' || last === '-' || !Number.isFinite(n) ? undefined : n;
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
    // the label values joined once (metrics.ts LABEL_SEP): route, service, consumer, node, request_type, request_llm_model, llm_model
    const common = `${S}${routeId}${S}${service}${S}${consumer}${S}${node}${S}traditional_http${S}${S}`;
    workerMetrics.incKey('http_status', `${ctx.variable('status') ?? ''}${S}${routeId}${S}${ctx.matchedUri}${S}${ctx.matchedHost}${S}${service}${S}${consumer}${S}${node}${S}traditional_http${S}${S}${S}${source}`, 1);
    const latency = (lastSeconds(ctx.variable('request_time')) ?? 0) * 1000;
    const upstream = lastSeconds(ctx.variable('upstream_response_time'));
    workerMetrics.observeKey('http_latency', 'request' + common, latency);
    if (upstream !== undefined) workerMetrics.observeKey('http_latency', 'upstream' + common, upstream * 1000);
    workerMetrics.observeKey('http_latency', 'apisix' + common, Math.max(0, latency - (upstream ?? 0) * 1000));
    workerMetrics.incKey('bandwidth', 'ingress' + common, Number(ctx.variable('request_length') ?? 0));
    workerMetrics.incKey('bandwidth', 'egress' + common, Number(ctx.variable('bytes_sent') ?? 0));
  },
};

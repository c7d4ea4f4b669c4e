/**
 * prometheus (apisix/plugins/prometheus.lua, exporter.lua): in the log
 * phase, a request on a route (or global rule) with the plugin counts in
 * apisix_http_status, apisix_http_latency (request, upstream, apisix) and
 * apisix_bandwidth (ingress, egress), with APISIX's labels. The export
 * endpoint (plugin_attr.prometheus.export_addr, 127.0.0.1:9091 and
 * /apisix/prometheus/metrics by default) sums every worker's counts.
 */
import { workerMetrics } from '../dataplane/metrics.ts';
import type { GatewayPlugin } from './registry.ts';

interface PrometheusConf { prefer_name: boolean }

/** The last of nginx's comma-separated per-try values (`0.002, 0.001` → 0.001); undefined for none or `-`. */
function lastSeconds(v: string | undefined): number | undefined {
  if (!v) return undefined;
  const last = v.split(/[,:]\s*/).pop()!.trim();
  const n = Number(last);
  return last === '' || last === '-' || !Number.isFinite(n) ? undefined : n;
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
    const lastAddr = upstreamAddr ? upstreamAddr.split(/,\s*/).pop()! : '';
    const node = lastAddr.startsWith('unix:') ? lastAddr : lastAddr.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
    const headerTime = ctx.variable('upstream_header_time');
    const source = ctx.answered ? 'apisix' : upstreamAddr ? (lastSeconds(headerTime) !== undefined ? 'upstream' : 'nginx') : 'apisix';
    const common = [routeId, service, consumer, node, 'traditional_http', '', ''];
    workerMetrics.inc('http_status', [ctx.variable('status') ?? '', routeId, ctx.matchedUri, ctx.matchedHost, service, consumer, node, 'traditional_http', '', '', source], 1);
    const latency = (lastSeconds(ctx.variable('request_time')) ?? 0) * 1000;
    const upstream = lastSeconds(ctx.variable('upstream_response_time'));
    workerMetrics.observe('http_latency', ['request', ...common], latency);
    if (upstream !== undefined) workerMetrics.observe('http_latency', ['upstream', ...common], upstream * 1000);
    workerMetrics.observe('http_latency', ['apisix', ...common], Math.max(0, latency - (upstream ?? 0) * 1000));
    workerMetrics.inc('bandwidth', ['ingress', ...common], Number(ctx.variable('request_length') ?? 0));
    workerMetrics.inc('bandwidth', ['egress', ...common], Number(ctx.variable('bytes_sent') ?? 0));
  },
};

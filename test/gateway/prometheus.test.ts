/**
 * The prometheus plugin: requests on a route with it are counted with
 * APISIX's metric names and labels (apisix_http_status, apisix_http_latency,
 * apisix_bandwidth), summed over every worker, on the export server
 * (plugin_attr.prometheus.export_addr and export_uri); a route without the
 * plugin is not counted.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { freePorts } from '../kit/server.ts';
import { defaultYaml, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let origin: Origin;
let exportPort: number;

before(async () => {
  origin = await startOrigin();
  [exportPort] = await freePorts(1);
  gw = await startGateway({
    yaml: `${defaultYaml(2)}plugin_attr:\n  prometheus:\n    export_addr:\n      ip: 127.0.0.1\n      port: ${exportPort}\n`,
  });
});

after(async () => {
  await gw?.stop();
  await origin?.close();
});

async function metrics(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${exportPort}/apisix/prometheus/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

function value(text: string, line: RegExp): number {
  const m = text.split('\n').find((l) => line.test(l));
  return m === undefined ? 0 : Number(m.slice(m.lastIndexOf(' ') + 1));
}

test('requests on a route with prometheus are counted with APISIX names and labels, over all workers', async () => {
  await put(gw, 'routes/1', { uri: '/counted', plugins: { prometheus: {} }, upstream: { type: 'roundrobin', nodes: { [origin.node]: 1 } } });
  await put(gw, 'routes/2', { uri: '/plain', upstream: { type: 'roundrobin', nodes: { [origin.node]: 1 } } });
  await untilRouted(gw, '/counted', (r) => r.status === 200);
  await untilRouted(gw, '/plain', (r) => r.status === 200);
  const before = await metrics();
  const status = /^apisix_http_status\{code="200",route="1",matched_uri="\/counted",matched_host="",service="",consumer="",node="127\.0\.0\.1",request_type="traditional_http",request_llm_model="",llm_model="",response_source="upstream"\} /;
  const n0 = value(before, status);
  // new connections each time: the two workers share them
  for (let i = 0; i < 20; i++) assert.equal((await proxy(gw, '/counted')).status, 200);
  for (let i = 0; i < 5; i++) await proxy(gw, '/plain');
  const text = await metrics();
  assert.equal(value(text, status), n0 + 20, text);
  assert.doesNotMatch(text, /route="2"/);
  assert.match(text, /^# TYPE apisix_http_latency histogram$/m);
  assert.match(text, /^apisix_http_latency_bucket\{type="request",route="1",service="",consumer="",node="127\.0\.0\.1",request_type="traditional_http",request_llm_model="",llm_model="",le="\+Inf"\} \d+$/m);
  assert.match(text, /^apisix_http_latency_count\{type="upstream",route="1",/m);
  assert.ok(value(text, /^apisix_bandwidth\{type="egress",route="1",/) > 0);
  assert.ok(value(text, /^apisix_bandwidth\{type="ingress",route="1",/) > 0);
  assert.match(text, /^apisix_node_info\{hostname="[^"]+",version="\d+\.\d+\.\d+"\} 1$/m);
  assert.ok(value(text, /^apisix_http_requests_total /) >= 25);
});

test("a plugin's own answer is counted with response_source apisix", async () => {
  await put(gw, 'routes/3', {
    uri: '/denied', plugins: { prometheus: {}, 'ip-restriction': { blacklist: ['127.0.0.0/8'] } },
    upstream: { type: 'roundrobin', nodes: { [origin.node]: 1 } },
  });
  await untilRouted(gw, '/denied', (r) => r.status === 403);
  const text = await metrics();
  assert.ok(value(text, /^apisix_http_status\{code="403",route="3",.*node="",.*response_source="apisix"\} /) >= 1, text);
});

test('only the export URI is served on the export port', async () => {
  const res = await fetch(`http://127.0.0.1:${exportPort}/other`);
  assert.equal(res.status, 404);
});

/**
 * The router's flatness (issue #11 item 1): with 10,000 routes a request
 * costs no more than 1.2× what it costs with 10. Two standalone gateways
 * (routes from conf/apisix.yaml, so 10,000 routes need no 10,000 Admin API
 * writes), one worker each pinned to the proxy core, the same prefix routes
 * (`/svc{i}/*`, a host on every tenth) and the same request to one of them;
 * CPU per request. The "nginx" column holds the 10-route gateway.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePorts } from '../test/kit/server.ts';
import { startGateway } from '../test/gateway/harness.ts';
import type { Gateway } from '../test/gateway/harness.ts';
import { cpuPerRequest } from './gateway-route.ts';
import { pinTree, PROXY_CORE, SMALL_BODY, startOrigin } from './servers.ts';
import { addRow } from './summary.ts';

async function standalone(routeCount: number, originPort: number): Promise<Gateway> {
  const prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-bench-router-'));
  const [admin, proxyPort] = await freePorts(2);
  fs.mkdirSync(path.join(prefix, 'conf'), { recursive: true });
  fs.writeFileSync(path.join(prefix, 'ports'), `${admin} ${proxyPort}`);
  fs.writeFileSync(path.join(prefix, 'conf', 'config.yaml'), `apisix:
  node_listen:
    - ip: 127.0.0.1
      port: ${proxyPort}
  ssl:
    enable: false
  enable_control: false
plugin_attr:
  prometheus:
    enable_export_server: false
nginx_config:
  worker_processes: 1
  error_log_level: error
deployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
`);
  const lines = ['upstreams:', '  - id: 1', '    type: roundrobin', '    nodes:', `      "127.0.0.1:${originPort}": 1`, 'routes:'];
  for (let i = 0; i < routeCount; i++) {
    lines.push(`  - id: r${i}`, `    uri: /svc${i}/*`, '    upstream_id: 1');
    if (i % 10 === 3) lines.push(`    hosts: ["t${i}.example.com"]`);
  }
  lines.push('#END', '');
  fs.writeFileSync(path.join(prefix, 'conf', 'apisix.yaml'), lines.join('\n'));
  const gw = await startGateway({ prefix });
  pinTree(gw.child.pid!, PROXY_CORE);
  return gw;
}

export async function gatewayRouterCase(seconds: number, warmupSeconds: number, roundCount: number): Promise<void> {
  const origin = await startOrigin();
  // the origin serves the routed path as a file (its /small is an exact location)
  fs.mkdirSync(path.join(origin.prefix, 'www', 'svc5'), { recursive: true });
  fs.writeFileSync(path.join(origin.prefix, 'www', 'svc5', 'small'), SMALL_BODY);
  const few = await standalone(10, origin.port);
  const many = await standalone(10_000, origin.port);
  console.log(`\ngateway router: 10 routes against 10,000 (one worker each, wrk ${seconds}s -c50, GET /svc5/small)`);
  try {
    // both answer the route before anything is measured (the 10,000-route file takes longer to load)
    for (const gw of [few, many]) {
      for (let tries = 0; ; tries++) {
        const r = await fetch(`http://127.0.0.1:${gw.proxyPort}/svc5/small`).catch(() => undefined);
        if (r?.status === 200) break;
        if (tries > 600) throw new Error('the standalone gateway never routed /svc5/small');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    const run = (gw: Gateway, s: number) => cpuPerRequest(gw.child.pid!, gw.proxyPort, '/svc5/small', s);
    await run(few, warmupSeconds);
    await run(many, warmupSeconds);
    const f = { few: [] as number[], many: [] as number[] };
    for (let i = 0; i < roundCount; i++) {
      f.few.push(await run(few, seconds));
      f.many.push(await run(many, seconds));
    }
    const ratio = f.many.map((m, i) => m / f.few[i]);
    console.log(`  CPU per request: 10 routes ${f.few.map((x) => x.toFixed(1)).join(', ')} µs; 10,000 routes ${f.many.map((x) => x.toFixed(1)).join(', ')} µs; ratios ${ratio.map((x) => x.toFixed(2)).join(', ')}`);
    addRow({ caseName: 'gateway router', label: '10,000 routes vs 10 (CPU per request)', unit: 'µs', nginx: f.few, gatehouse: f.many, bar: { ratioAtMost: 1.2 } });
  } finally {
    await few.stop();
    await many.stop();
    await origin.stop();
  }
}

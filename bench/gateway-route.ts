/**
 * The gateway's request path against the same proxying written as an
 * nginx configuration (issue #11): a route with no plugins, and one with
 * basic-auth + limit-count + prometheus, each against `proxy_pass` in an
 * nginx.conf run by Gatehouse (the bar) and, beside it, by Debian's nginx.
 * One worker each, pinned to the proxy core; the same origin and small
 * response as the small proxied case; every server writes an access log
 * line per request (the gateway always does).
 */
import { freePort, startGatehouse, startNginx } from '../test/kit/server.ts';
import { startGateway, defaultYaml, ADMIN_KEY } from '../test/gateway/harness.ts';
import type { Gateway } from '../test/gateway/harness.ts';
import { wrkRun } from './cases.ts';
import { cpuMicros } from './proc.ts';
import { pinTree, PROXY_CORE, startOrigin, wrap } from './servers.ts';
import { addRow } from './summary.ts';

export const AUTH = `Authorization: Basic ${Buffer.from('bench:secret').toString('base64')}`;

export function proxyPassConf(port: number, originPort: number): string {
  return `
worker_processes 1;
events { worker_connections 20000; }
http {
    access_log %%PREFIX%%/access.log;
    keepalive_requests 1000000;
    upstream origin { server 127.0.0.1:${originPort}; keepalive 320; }
    server {
        listen 127.0.0.1:${port} backlog=4096;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }
    }
}
`;
}

export async function cpuPerRequest(pid: number, port: number, path: string, seconds: number, headers: string[] = []): Promise<number> {
  const cpu0 = cpuMicros(pid);
  const w = await wrkRun(port, path, seconds, 50, 'http', headers);
  if (w.errors) console.log(`  ${path} on ${port}: ${w.errors} socket errors or non-2xx responses`);
  return w.requests ? (cpuMicros(pid) - cpu0) / w.requests : NaN;
}

/** The bench's routes on a gateway: `/small` with no plugins, `/plugged` with basic-auth + limit-count + prometheus (+ proxy-rewrite to /small). */
export async function setUpRoutes(gw: Pick<Gateway, 'admin'>, originPort: number, adminKey: string): Promise<void> {
  const upstream = { type: 'roundrobin', nodes: { [`127.0.0.1:${originPort}`]: 1 }, keepalive_pool: { size: 320 } };
  const must = async (uri: string, body: unknown) => {
    const r = await gw.admin('PUT', `/gateway/admin/${uri}`, body, { 'X-API-KEY': adminKey });
    if (r.status >= 300) throw new Error(`PUT ${uri}: ${r.status} ${r.text}`);
  };
  await must('routes/plain', { uri: '/small', upstream });
  await must('consumers', { username: 'bench', plugins: { 'basic-auth': { username: 'bench', password: 'secret' } } });
  await must('routes/plugins', {
    uri: '/plugged', plugins: {
      'basic-auth': {}, 'limit-count': { count: 1e9, time_window: 60, key_type: 'var', key: 'remote_addr' }, prometheus: {},
      'proxy-rewrite': { uri: '/small' },
    }, upstream,
  });
}

export async function gatewayRouteCase(seconds: number, warmupSeconds: number, roundCount: number): Promise<void> {
  const origin = await startOrigin();
  const opts = (port: number) => ({ conf: proxyPassConf(port, origin.port), errorLogLevel: 'error', timeoutMs: 60000 });
  const ngPort = await freePort();
  const ghPort = await freePort();
  const nginx = await wrap('nginx', await startNginx(opts(ngPort)), ngPort, PROXY_CORE);
  const gatehouse = await wrap('gatehouse', await startGatehouse(opts(ghPort)), ghPort, PROXY_CORE);
  const gw = await startGateway({ yaml: defaultYaml(1).replace('  error_log_level: info', '  error_log_level: error') });
  pinTree(gw.child.pid!, PROXY_CORE);
  await setUpRoutes(gw, origin.port, ADMIN_KEY);
  console.log(`\ngateway route against proxy_pass (one worker each, wrk ${seconds}s -c50; access log on everywhere)`);
  try {
    const runs = [
      ['nginx proxy_pass', (s: number) => cpuPerRequest(nginx.pid, ngPort, '/small', s)],
      ['gatehouse proxy_pass', (s: number) => cpuPerRequest(gatehouse.pid, ghPort, '/small', s)],
      ['gateway route', (s: number) => cpuPerRequest(gw.child.pid!, gw.proxyPort, '/small', s)],
      ['gateway route + plugins', (s: number) => cpuPerRequest(gw.child.pid!, gw.proxyPort, '/plugged', s, [AUTH])],
    ] as const;
    // V8 compiles each path in its first seconds: not counted
    for (const [, run] of runs) await run(warmupSeconds);
    const f: Record<string, number[]> = {};
    for (let i = 0; i < roundCount; i++) for (const [name, run] of runs) (f[name] ??= []).push(await run(seconds));
    const t = 'gateway route';
    addRow({ caseName: t, label: 'Gatehouse proxy_pass vs nginx', unit: 'µs', nginx: f['nginx proxy_pass'], gatehouse: f['gatehouse proxy_pass'] });
    // the bar compares the gateway with Gatehouse's own proxy_pass: the "nginx" column holds that here
    addRow({ caseName: t, label: 'no plugins vs Gatehouse proxy_pass', unit: 'µs', nginx: f['gatehouse proxy_pass'], gatehouse: f['gateway route'], bar: { ratioAtMost: 1.3 } });
    addRow({ caseName: t, label: 'basic-auth+limit-count+prometheus vs Gatehouse proxy_pass', unit: 'µs', nginx: f['gatehouse proxy_pass'], gatehouse: f['gateway route + plugins'], bar: { ratioAtMost: 1.6 } });
    addRow({ caseName: t, label: 'no plugins vs nginx proxy_pass', unit: 'µs', nginx: f['nginx proxy_pass'], gatehouse: f['gateway route'] });
  } finally {
    await gw.stop();
    for (const s of [nginx, gatehouse, origin]) await s.stop();
  }
}

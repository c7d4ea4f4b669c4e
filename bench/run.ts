/**
 * `npm run bench`: Gatehouse and Debian's nginx side by side, in one run, in
 * front of the same origins, with the same proxy configuration (one worker
 * each, the proxy under test pinned to its own core, origins and load
 * generators on the other). Each case runs BENCH_ROUNDS rounds; a round
 * measures nginx, then Gatehouse, so the two see the same machine. A case
 * reports the median of each server's figures and the median of the rounds'
 * ratios, then a summary in the shape of issue #9's table, with its bars.
 *
 * The figure to trust is CPU: the proxy's user+sys CPU over a run, per
 * request, MiB or message — it moves much less than requests per second when
 * the machine is busy. Loopback only. Needs nginx, wrk and taskset (the bench
 * says what is missing); curl for the fast client if present.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { startOrigin, startProxy, startWsOrigin, type BenchServer } from './servers.ts';
import { idleConnections, haveCurl, streamFast, streamSlow, watchTempFiles, wrkRun, wsEcho } from './cases.ts';
import { cpuMicros } from './proc.ts';
import { handshakeRun, startTlsServer, tlsKeepalive, TLS_WARMUP_SECONDS, warmTls, type TlsServer } from './tls.ts';
import { printSummary, rows, type Bar } from './summary.ts';
import { report, rounds, ROUNDS, type Figures, type Kind } from './rounds.ts';
import { luaCases } from './lua.ts';
import { gatewayCase } from './gateway.ts';
import { gatewayRouteCase } from './gateway-route.ts';
import { gatewayRouterCase } from './gateway-router.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const ONLY = process.env.BENCH_ONLY?.split(',');
/** wrk before a server's first measured run, not counted: V8 compiles the request path in the first seconds. */
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP ?? 5);
const WS_CONNECTIONS = 50;

function need(cmd: string): void {
  try { execFileSync('sh', ['-c', `command -v ${cmd}`]); } catch {
    console.error(`bench: '${cmd}' is not installed (apt-get install ${cmd === 'taskset' ? 'util-linux' : cmd})`);
    process.exit(2);
  }
}

function wanted(name: string): boolean {
  return !ONLY || ONLY.includes(name);
}

async function wrkCase(title: string, path: string, servers: Record<Kind, BenchServer>, bars: { cpu: Bar; p99?: Bar }): Promise<void> {
  console.log(`\n${title}`);
  const r = await rounds(servers, async (s) => {
    const cpu0 = cpuMicros(s.pid);
    const w = await wrkRun(s.port, path, SECONDS, 50);
    const cpu = cpuMicros(s.pid) - cpu0;
    if (w.errors) console.log(`  ${s.kind}: ${w.errors} socket errors or non-2xx responses`);
    return { cpu: w.requests ? cpu / w.requests : NaN, rps: w.rps, p50: w.p50, p99: w.p99 };
  }, (s) => wrkRun(s.port, path, WARMUP_SECONDS, 50));
  report(title, 'CPU per request', 'µs', r, 'cpu', bars.cpu);
  report(title, 'latency p99', 'ms', r, 'p99', bars.p99);
  report(title, 'latency p50', 'ms', r, 'p50');
  report(title, 'requests/s', 'req/s', r, 'rps');
}

async function streamCases(servers: Record<Kind, BenchServer>): Promise<void> {
  const temp = { nginx: watchTempFiles(servers.nginx), gatehouse: watchTempFiles(servers.gatehouse) };
  const fastTitle = `100 MiB to a client reading as fast as it can (${haveCurl ? 'curl -o /dev/null' : 'a Node reader: curl is not installed'})`;
  console.log(`\n${fastTitle}`);
  const fast = await rounds(servers, async (s) => ({ ...await streamFast(s) }), streamFast);
  report(fastTitle, 'throughput', 'MB/s', fast, 'mbPerSec', { ratioAtLeast: 0.8 });
  report(fastTitle, 'CPU per MiB', 'µs', fast, 'cpuPerMiB', { ratioAtMost: 1.5 });
  const slowTitle = '100 MiB to a client reading 25 MB/s';
  console.log(`\n${slowTitle}`);
  const slow = await rounds(servers, async (s) => ({ rss: (await streamSlow(s)).rssGrowth / 2 ** 20 }));
  report(slowTitle, 'RSS growth while streaming', 'MiB', slow, 'rss', { gatehouseBelow: 16 });
  const files = { nginx: temp.nginx.stop(), gatehouse: temp.gatehouse.stop() };
  const note = `files created or removed in proxy_temp during the 100 MiB cases: nginx ${files.nginx}, gatehouse ${files.gatehouse}`;
  console.log(`  ${note}${files.nginx || files.gatehouse ? ' — the figures include disk writes (expected none: proxy_max_temp_file_size 0)' : ''}`);
}

/**
 * Streaming against history (runs first, while the servers are fresh): 100 MiB
 * to the fast client three times, then wrk on small and 64 KiB responses, then
 * three times again. Gatehouse's CPU per MiB used to triple after such load
 * (docs/performance.md); the figure is after/before for each server.
 */
async function historyCase(servers: Record<Kind, BenchServer>): Promise<void> {
  const title = `100 MiB to the fast client, after ${2 * SECONDS}s of wrk against a fresh process`;
  console.log(`\n${title}`);
  const figures: Record<Kind, Figures[]> = { nginx: [], gatehouse: [] };
  for (const k of ['nginx', 'gatehouse'] as const) {
    const s = servers[k];
    const fresh: number[] = [];
    for (let i = 0; i < 3; i++) fresh.push((await streamFast(s)).cpuPerMiB);
    await wrkRun(s.port, '/small', SECONDS, 50);
    await wrkRun(s.port, '/64k', SECONDS, 50);
    const after: number[] = [];
    for (let i = 0; i < 3; i++) after.push((await streamFast(s)).cpuPerMiB);
    figures[k] = fresh.map((f, i) => ({ fresh: f, after: after[i], change: after[i] / f }));
  }
  report(title, 'CPU per MiB, fresh', 'µs', figures, 'fresh');
  report(title, 'CPU per MiB, after load', 'µs', figures, 'after');
  report(title, 'after / fresh', '×', figures, 'change');
}

async function idleCase(servers: Record<Kind, BenchServer>): Promise<void> {
  const title = '5,000 idle keepalive connections';
  console.log(`\n${title} (RSS growth one second after the last opened; docs/performance.md says what it shows)`);
  const r = await rounds(servers, async (s) => ({ bytes: await idleConnections(s, 5000) }));
  report(title, 'memory per connection', 'bytes', r, 'bytes', { gatehouseBelow: 2000 });
}

async function wsCase(servers: Record<Kind, BenchServer>): Promise<void> {
  const title = `${WS_CONNECTIONS} WebSocket connections echoing small frames`;
  console.log(`\n${title}`);
  const r = await rounds(servers, async (s) => {
    const w = await wsEcho(s, WS_CONNECTIONS, SECONDS);
    if (w.errors) console.log(`  ${s.kind}: ${w.errors} connections failed`);
    return { cpu: w.cpuPerMsg, rate: w.msgPerSec };
  }, (s) => wsEcho(s, WS_CONNECTIONS, Math.min(WARMUP_SECONDS, 3)));
  report(title, 'CPU per message', 'µs', r, 'cpu');
  report(title, 'messages/s', 'msg/s', r, 'rate');
}

async function tlsCases(): Promise<void> {
  const tls: Record<Kind, TlsServer> = { nginx: await startTlsServer('nginx'), gatehouse: await startTlsServer('gatehouse') };
  try {
    console.log(`\nTLS: each server first does ${TLS_WARMUP_SECONDS}s of full handshakes (JIT warm-up), then 2s before each run`);
    await warmTls(tls.nginx);
    await warmTls(tls.gatehouse);
    // the table has the ECDSA handshake and keepalive; the others run one round
    const cases = [
      ['full handshake + GET, ECDSA P-256', 'ecdsa', false, ROUNDS, { ratioAtMost: 1.5 }],
      ['full handshake + GET, RSA 2048', 'rsa', false, 1, undefined],
      ['resumed handshake + GET, session cache', 'cache', true, 1, undefined],
      ['resumed handshake + GET, session tickets', 'tickets', true, 1, undefined],
    ] as const;
    for (const [title, port, resume, count, bar] of cases) {
      console.log(`\nTLS ${title}`);
      const r = await rounds(tls, async (s) => {
        const h = await handshakeRun(s as TlsServer, (s as TlsServer).ports[port], resume, SECONDS);
        return { cpu: h.cpuPerHandshake, resumed: h.resumedShare * 100 };
      }, undefined, count);
      report(`TLS ${title}`, 'CPU per handshake', 'µs', r, 'cpu', bar);
      if (resume) report(`TLS ${title}`, 'resumed', '%', r, 'resumed');
    }
    const title = 'TLS keepalive GET';
    console.log(`\n${title}`);
    const r = await rounds(tls, async (s) => {
      const k = await tlsKeepalive(s as TlsServer, SECONDS);
      return { cpu: k.cpuPerReq, rps: k.rps };
    });
    report(title, 'CPU per request', 'µs', r, 'cpu', { ratioAtMost: 2.0 });
    report(title, 'requests/s', 'req/s', r, 'rps');
  } finally {
    await tls.nginx.stop();
    await tls.gatehouse.stop();
  }
}

async function main(): Promise<void> {
  for (const c of ['nginx', 'wrk', 'taskset']) need(c);
  const started = Date.now();
  const origin = await startOrigin();
  const ws = await startWsOrigin();
  const servers: Record<Kind, BenchServer> = {
    nginx: await startProxy('nginx', origin.port, ws.port),
    gatehouse: await startProxy('gatehouse', origin.port, ws.port),
  };
  console.log(`origins on core ${origin.core}; proxies pinned to core ${servers.nginx.core}; ${ROUNDS} rounds, wrk ${SECONDS}s -c50 per run`);
  try {
    if (wanted('history')) await historyCase(servers);
    if (wanted('small')) await wrkCase('small proxied request (100 B), keepalive both sides', '/small', servers, { cpu: { ratioAtMost: 2.0 }, p99: { ratioAtMost: 2.0 } });
    if (wanted('64k')) await wrkCase('64 KiB proxied response', '/64k', servers, { cpu: { ratioAtMost: 1.3 } });
    if (wanted('stream')) await streamCases(servers);
    if (wanted('idle')) await idleCase(servers);
    if (wanted('ws')) await wsCase(servers);
  } finally {
    for (const s of [servers.nginx, servers.gatehouse, origin, ws]) await s.stop();
  }
  if (wanted('tls')) await tlsCases();
  if (wanted('lua')) await luaCases(SECONDS, WARMUP_SECONDS);
  if (wanted('gateway-route')) await gatewayRouteCase(SECONDS, WARMUP_SECONDS, ROUNDS);
  if (wanted('gateway-router')) await gatewayRouterCase(SECONDS, WARMUP_SECONDS, ROUNDS);
  if (wanted('gateway')) await gatewayCase(SECONDS);
  printSummary(`${ROUNDS} rounds, same-round medians; ${((Date.now() - started) / 60000).toFixed(1)} min`);
  const out = process.env.BENCH_JSON;
  if (out) fs.writeFileSync(out, JSON.stringify(rows, null, 2));
}

await main();

/**
 * `npm run bench`: Gatehouse and Debian's nginx side by side, in one run, in
 * front of the same origin, with the same proxy configuration (one worker
 * each, the proxy under test pinned to its own core). Prints, for both and
 * as ratios: requests/s and p50/p99 latency (wrk), CPU µs per request (the
 * proxy's user+sys CPU over the run — the figure that survives a noisy
 * machine), streaming of a 100 MiB body to a fast and a slow client (MB/s,
 * RSS growth), and memory per idle keepalive connection.
 *
 * Loopback only. Needs nginx, wrk and taskset (the bench says what is missing).
 * BENCH_SECONDS (default 8) sets the wrk duration per case, BENCH_WARMUP
 * (default 5) the unmeasured wrk run before it, BENCH_TLS_WARMUP (default 10)
 * the unmeasured handshakes before the TLS cases.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { startOrigin, startProxy, type BenchServer } from './servers.ts';
import { idleConnections, streamBody, wrkRun, type WrkResult } from './cases.ts';
import { cpuMicros } from './proc.ts';
import { handshakeRun, startTlsServer, tlsKeepalive, TLS_WARMUP_SECONDS, warmTls } from './tls.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const ONLY = process.env.BENCH_ONLY?.split(',');
/** wrk before each measured run, not counted: V8 compiles the request path in the first seconds. */
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP ?? 5);

function need(cmd: string): void {
  try { execFileSync('sh', ['-c', `command -v ${cmd}`]); } catch {
    console.error(`bench: '${cmd}' is not installed (apt-get install ${cmd === 'taskset' ? 'util-linux' : cmd})`);
    process.exit(2);
  }
}

interface Row { name: string; unit: string; nginx: number; gatehouse: number; lowerIsBetter: boolean }
const rows: Row[] = [];

function report(name: string, unit: string, nginx: number, gatehouse: number, lowerIsBetter: boolean): void {
  rows.push({ name, unit, nginx, gatehouse, lowerIsBetter });
  const ratio = nginx > 0 ? gatehouse / nginx : NaN;
  console.log(`  ${name.padEnd(34)} nginx ${fmt(nginx).padStart(10)}  gatehouse ${fmt(gatehouse).padStart(10)} ${unit.padEnd(8)} ratio ${ratio.toFixed(2)}×`);
}

function fmt(n: number): string {
  return n >= 100 ? n.toFixed(0) : n.toFixed(1);
}

async function throughputCase(label: string, path: string, servers: Record<'nginx' | 'gatehouse', BenchServer>): Promise<void> {
  const res: Partial<Record<'nginx' | 'gatehouse', WrkResult & { cpuPerReq: number }>> = {};
  for (const which of ['nginx', 'gatehouse'] as const) {
    const s = servers[which];
    await wrkRun(s.port, path, WARMUP_SECONDS, 50); // warm-up: JIT, keepalive pools
    const cpu0 = cpuMicros(s.pid);
    const r = await wrkRun(s.port, path, SECONDS, 50);
    const cpu1 = cpuMicros(s.pid);
    res[which] = { ...r, cpuPerReq: r.requests ? (cpu1 - cpu0) / r.requests : NaN };
  }
  const n = res.nginx!, g = res.gatehouse!;
  console.log(`\n${label}`);
  report('CPU per request', 'µs', n.cpuPerReq, g.cpuPerReq, true);
  report('requests/s', 'req/s', n.rps, g.rps, false);
  report('latency p50', 'ms', n.p50, g.p50, true);
  report('latency p99', 'ms', n.p99, g.p99, true);
  if (n.errors || g.errors) console.log(`  socket errors/non-2xx: nginx ${n.errors}, gatehouse ${g.errors}`);
}

async function tlsCases(): Promise<void> {
  const tlsServers = { nginx: await startTlsServer('nginx'), gatehouse: await startTlsServer('gatehouse') };
  try {
    console.log(`\nTLS: each server first does ${TLS_WARMUP_SECONDS}s of full handshakes (JIT warm-up), then 2s before each case`);
    await warmTls(tlsServers.nginx);
    await warmTls(tlsServers.gatehouse);
    const cases = [
      ['full handshake, ECDSA P-256', 'ecdsa', false],
      ['full handshake, RSA 2048', 'rsa', false],
      ['resumed handshake, session cache', 'cache', true],
      ['resumed handshake, session tickets', 'tickets', true],
    ] as const;
    for (const [label, port, resume] of cases) {
      const n = await handshakeRun(tlsServers.nginx, tlsServers.nginx.ports[port], resume, SECONDS);
      const g = await handshakeRun(tlsServers.gatehouse, tlsServers.gatehouse.ports[port], resume, SECONDS);
      console.log(`\nTLS ${label} (with one small request)`);
      report('CPU per handshake', 'µs', n.cpuPerHandshake, g.cpuPerHandshake, true);
      report('handshakes per CPU second', '/s', 1e6 / n.cpuPerHandshake, 1e6 / g.cpuPerHandshake, false);
      if (resume) console.log(`  resumed: nginx ${(n.resumedShare * 100).toFixed(0)}%, gatehouse ${(g.resumedShare * 100).toFixed(0)}%`);
    }
    const n = await tlsKeepalive(tlsServers.nginx, SECONDS);
    const g = await tlsKeepalive(tlsServers.gatehouse, SECONDS);
    console.log('\nkeepalive requests over TLS (small GET)');
    report('CPU per request', 'µs', n.cpuPerReq, g.cpuPerReq, true);
    report('requests/s', 'req/s', n.rps, g.rps, false);
  } finally {
    await tlsServers.nginx.stop();
    await tlsServers.gatehouse.stop();
  }
}

async function main(): Promise<void> {
  for (const c of ['nginx', 'wrk', 'taskset']) need(c);
  const origin = await startOrigin();
  const servers = {
    nginx: await startProxy('nginx', origin.port),
    gatehouse: await startProxy('gatehouse', origin.port),
  };
  console.log(`origin: nginx on 127.0.0.1:${origin.port}; proxies pinned to core ${servers.nginx.core}; wrk ${SECONDS}s per case`);
  try {
    if (!ONLY || ONLY.includes('small')) await throughputCase('100-byte responses, keepalive on both sides', '/small', servers);
    if (!ONLY || ONLY.includes('64k')) await throughputCase('64 KiB responses', '/64k', servers);
    if (!ONLY || ONLY.includes('stream')) {
      for (const speed of ['fast', 'slow'] as const) {
        const r = { nginx: await streamBody(servers.nginx, speed), gatehouse: await streamBody(servers.gatehouse, speed) };
        console.log(`\n100 MiB body to a ${speed} client`);
        report('throughput', 'MB/s', r.nginx.mbPerSec, r.gatehouse.mbPerSec, false);
        report('RSS growth while streaming', 'MiB', r.nginx.rssGrowth / 2 ** 20, r.gatehouse.rssGrowth / 2 ** 20, true);
      }
    }
    if (!ONLY || ONLY.includes('idle')) {
      const r = { nginx: await idleConnections(servers.nginx, 5000), gatehouse: await idleConnections(servers.gatehouse, 5000) };
      console.log('\n5,000 idle keepalive client connections (RSS growth; docs/performance.md says what it shows)');
      report('memory per connection', 'bytes', r.nginx, r.gatehouse, true);
    }
  } finally {
    for (const s of [servers.nginx, servers.gatehouse, origin]) await s.stop();
  }
  if (!ONLY || ONLY.includes('tls')) await tlsCases();
  const out = process.env.BENCH_JSON;
  if (out) fs.writeFileSync(out, JSON.stringify(rows, null, 2));
}

await main();

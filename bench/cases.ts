/**
 * Benchmark cases: wrk load, a 100 MiB body to a fast and a slow client,
 * memory per idle keepalive connection, and WebSocket echoes.
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { benchNode, LOAD_CORE, type BenchServer } from './servers.ts';
import { cpuMicros, rssBytes, rssSampler } from './proc.ts';

export interface WrkResult {
  rps: number;
  requests: number;
  p50: number;
  p99: number;
  errors: number;
}

function ms(value: string, unit: string): number {
  const v = Number(value);
  return unit === 'us' ? v / 1000 : unit === 's' ? v * 1000 : v;
}

/** Runs wrk (one thread, on the load core) and parses its summary. */
export function wrkRun(port: number, path: string, seconds: number, connections: number, scheme = 'http', headers: string[] = []): Promise<WrkResult> {
  return new Promise((resolve, reject) => {
    const args = ['-c', String(LOAD_CORE), 'wrk', '-t1', `-c${connections}`, `-d${seconds}s`, '--latency', ...headers.flatMap((h) => ['-H', h]), `${scheme}://127.0.0.1:${port}${path}`];
    const p = spawn('taskset', args);
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    p.on('error', reject);
    p.on('exit', () => {
      const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? NaN);
      const lat = (pct: string) => {
        const m = new RegExp(`\\s${pct}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
        return m ? ms(m[1], m[2]) : NaN;
      };
      const errors = num(/Non-2xx or 3xx responses: (\d+)/) || 0;
      const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
      resolve({
        rps: num(/Requests\/sec:\s+([\d.]+)/),
        requests: num(/(\d+) requests in/),
        p50: lat('50'),
        p99: lat('99'),
        errors: errors + (sock ? sock.slice(1).map(Number).reduce((a, b) => a + b, 0) : 0),
      });
    });
  });
}

const BODY = 100 * 2 ** 20;

/** Whether curl is there (the fast client); without it a Node reader takes its place. */
export const haveCurl = (() => {
  try { execFileSync('sh', ['-c', 'command -v curl'], { stdio: 'ignore' }); return true; } catch { return false; }
})();

/**
 * The 100 MiB body to a client that reads as fast as it can: `curl -o
 * /dev/null` on the load core. Throughput, and the proxy's CPU per MiB.
 */
export async function streamFast(s: BenchServer): Promise<{ mbPerSec: number; cpuPerMiB: number }> {
  const cpu0 = cpuMicros(s.pid);
  const started = process.hrtime.bigint();
  const received = haveCurl ? curlGet(s.port) : await nodeGet(s.port);
  const secs = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = cpuMicros(s.pid) - cpu0;
  if (received !== BODY) throw new Error(`${s.kind}: got ${received} bytes of 100 MiB`);
  return { mbPerSec: received / 1e6 / secs, cpuPerMiB: cpu / (received / 2 ** 20) };
}

function curlGet(port: number): number {
  const out = execFileSync('taskset', ['-c', String(LOAD_CORE), 'curl', '-s', '-o', '/dev/null', '-w', '%{size_download}', `http://127.0.0.1:${port}/100m`]);
  return Number(out.toString());
}

function nodeGet(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let received = -1;
    const sock = net.connect(port, '127.0.0.1', () => sock.write('GET /100m HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n'));
    sock.on('data', (d: Buffer) => {
      if (received < 0) {
        const end = d.indexOf('\r\n\r\n');
        received = end < 0 ? 0 : d.length - end - 4;
      } else received += d.length;
    });
    sock.on('error', reject);
    sock.on('close', () => resolve(received));
  });
}

/**
 * The 100 MiB body to a client that reads at 25 MB/s (pausing its socket), so
 * the proxy must hold the origin back: the proxy's RSS growth (peak while
 * streaming, over RSS before).
 */
export function streamSlow(s: BenchServer): Promise<{ rssGrowth: number }> {
  return new Promise((resolve, reject) => {
    const before = rssBytes(s.pid);
    const sampler = rssSampler(s.pid);
    const sock = net.connect(s.port, '127.0.0.1');
    let received = 0;
    const bytesPerTick = 25e6 / 50; // 25 MB/s in 20 ms steps
    let budget = bytesPerTick;
    const timer = setInterval(() => { budget = bytesPerTick; sock.resume(); }, 20);
    sock.write('GET /100m HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n');
    sock.on('data', (d: Buffer) => {
      received += d.length;
      budget -= d.length;
      if (budget <= 0) sock.pause();
    });
    sock.on('error', reject);
    sock.on('close', () => {
      clearInterval(timer);
      const peak = sampler.stop();
      if (received < BODY) return reject(new Error(`${s.kind}: got ${received} bytes of 100 MiB`));
      resolve({ rssGrowth: Math.max(0, peak - before) });
    });
  });
}

/** Counts files created in the server's proxy_temp while it runs; none should be. */
export function watchTempFiles(s: BenchServer): { stop(): number } {
  let created = 0;
  const w = fs.watch(`${s.prefix}/proxy_temp`, (event) => { if (event === 'rename') created++; });
  return { stop() { w.close(); return created; } };
}

/**
 * `conns` WebSocket connections echoing small frames through the proxy for
 * `seconds` (bench/ws.ts, its own process on the load core): the proxy's CPU
 * per message.
 */
export async function wsEcho(s: BenchServer, conns: number, seconds: number): Promise<{ cpuPerMsg: number; msgPerSec: number; errors: number }> {
  const cpu0 = cpuMicros(s.pid);
  const p = benchNode(['ws.ts', 'client', String(s.port), String(conns), String(seconds)]);
  let out = '';
  p.stdout!.on('data', (d) => { out += d; });
  await new Promise((resolve) => p.on('exit', resolve));
  const cpu = cpuMicros(s.pid) - cpu0;
  const r = JSON.parse(out || '{"messages":0,"errors":-1}') as { messages: number; errors: number };
  return { cpuPerMsg: r.messages ? cpu / r.messages : NaN, msgPerSec: r.messages / seconds, errors: r.errors };
}

/** Opens `n` keepalive connections that each made one small request, then measures RSS growth per connection. */
export async function idleConnections(s: BenchServer, n: number): Promise<number> {
  const before = rssBytes(s.pid);
  const socks: net.Socket[] = [];
  const batch = 250;
  for (let i = 0; i < n; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, n - i) }, () => new Promise<void>((resolve, reject) => {
      const sock = net.connect(s.port, '127.0.0.1', () => sock.write('GET /small HTTP/1.1\r\nHost: bench\r\n\r\n'));
      sock.once('data', () => resolve());
      sock.on('error', reject);
      socks.push(sock);
    })));
  }
  await new Promise((r) => setTimeout(r, 1000));
  const after = rssBytes(s.pid);
  for (const sock of socks) sock.destroy();
  await new Promise((r) => setTimeout(r, 500));
  return Math.max(0, after - before) / n;
}

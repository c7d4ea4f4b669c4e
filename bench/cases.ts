/**
 * Benchmark cases: wrk load, a 100 MiB body to a fast and a slow client,
 * and memory per idle keepalive connection.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { LOAD_CORE, type BenchServer } from './servers.ts';
import { rssBytes, rssSampler } from './proc.ts';

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
export function wrkRun(port: number, path: string, seconds: number, connections: number, scheme = 'http'): Promise<WrkResult> {
  return new Promise((resolve, reject) => {
    const args = ['-c', String(LOAD_CORE), 'wrk', '-t1', `-c${connections}`, `-d${seconds}s`, '--latency', `${scheme}://127.0.0.1:${port}${path}`];
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

/**
 * Downloads the 100 MiB body through the proxy. `slow` reads at about
 * 20 MB/s (pausing the socket), so the proxy must hold back or spill to disk.
 */
export function streamBody(s: BenchServer, speed: 'fast' | 'slow'): Promise<{ mbPerSec: number; rssGrowth: number }> {
  return new Promise((resolve, reject) => {
    const before = rssBytes(s.pid);
    const sampler = rssSampler(s.pid);
    const started = process.hrtime.bigint();
    const sock = net.connect(s.port, '127.0.0.1');
    let received = 0;
    const bytesPerTick = 20 * 2 ** 20 / 50; // 20 MB/s in 20 ms steps
    let budget = bytesPerTick;
    let timer: NodeJS.Timeout | undefined;
    if (speed === 'slow') {
      timer = setInterval(() => { budget = bytesPerTick; sock.resume(); }, 20);
    }
    sock.write('GET /100m HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n');
    sock.on('data', (d: Buffer) => {
      received += d.length;
      if (speed === 'slow') {
        budget -= d.length;
        if (budget <= 0) sock.pause();
      }
    });
    sock.on('error', reject);
    sock.on('close', () => {
      if (timer) clearInterval(timer);
      const secs = Number(process.hrtime.bigint() - started) / 1e9;
      const peak = sampler.stop();
      if (received < 100 * 2 ** 20) return reject(new Error(`${s.kind}: got ${received} bytes of 100 MiB`));
      resolve({ mbPerSec: received / 1e6 / secs, rssGrowth: Math.max(0, peak - before) });
    });
  });
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

/**
 * TLS cases of the benchmark: full handshakes (ECDSA P-256 and RSA 2048),
 * resumed handshakes (session cache, session tickets) and keepalive requests
 * over TLS — nginx and Gatehouse with the same configuration, one worker
 * each, pinned to the same core. Each handshake carries one small request,
 * as a browser's first request does.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { freePort, startGatehouse, startNginx } from '../test/kit/server.ts';
import { cpuMicros } from './proc.ts';
import { wrkRun } from './cases.ts';
import type { BenchServer } from './servers.ts';
import { pinTree, PROXY_CORE } from './servers.ts';

export interface TlsPorts {
  ecdsa: number;
  rsa: number;
  cache: number;
  tickets: number;
}

export interface TlsServer extends BenchServer {
  ports: TlsPorts;
}

/** Self-signed ECDSA P-256 and RSA 2048 certificates, as files for the server's prefix. */
function makeCerts(): Record<string, Buffer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-bench-certs-'));
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  run('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2',
    '-subj', '/CN=localhost', '-keyout', 'ecdsa.key', '-out', 'ecdsa.crt');
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2',
    '-subj', '/CN=localhost', '-keyout', 'rsa.key', '-out', 'rsa.crt');
  const files: Record<string, Buffer> = {};
  for (const f of ['ecdsa.crt', 'ecdsa.key', 'rsa.crt', 'rsa.key']) files[f] = fs.readFileSync(path.join(dir, f));
  fs.rmSync(dir, { recursive: true });
  return files;
}

function tlsConf(p: TlsPorts): string {
  const server = (port: number, cert: string, extra: string) => `
    server {
        listen 127.0.0.1:${port} ssl backlog=4096;
        ssl_certificate %%PREFIX%%/${cert}.crt;
        ssl_certificate_key %%PREFIX%%/${cert}.key;
        ${extra}
        location / { return 200 "hello\\n"; }
    }`;
  const full = 'ssl_session_cache off; ssl_session_tickets off;';
  return `
worker_processes 1;
events { worker_connections 20000; }
http {
    access_log off;
    keepalive_requests 1000000;
    ssl_protocols TLSv1.2 TLSv1.3;
    # the same key exchange on both: Node's OpenSSL 3.5 would otherwise pick the
    # heavier X25519MLKEM768 hybrid, which Debian's OpenSSL 3.0 does not have
    ssl_ecdh_curve X25519:prime256v1;
    ${server(p.ecdsa, 'ecdsa', full)}
    ${server(p.rsa, 'rsa', full)}
    ${server(p.cache, 'ecdsa', 'ssl_session_cache shared:SSL:10m; ssl_session_tickets off;')}
    ${server(p.tickets, 'ecdsa', 'ssl_session_cache off; ssl_session_tickets on;')}
}
`;
}

export async function startTlsServer(kind: 'nginx' | 'gatehouse'): Promise<TlsServer> {
  const ports: TlsPorts = { ecdsa: await freePort(), rsa: await freePort(), cache: await freePort(), tickets: await freePort() };
  const start = kind === 'nginx' ? startNginx : startGatehouse;
  const real = await start({ conf: tlsConf(ports), files: makeCerts(), errorLogLevel: 'error', timeoutMs: 60000 });
  pinTree(real.pid, PROXY_CORE);
  return { kind, port: ports.ecdsa, pid: real.pid, core: PROXY_CORE, prefix: real.prefix, ports, stop: async () => { await real.stop(); } };
}

const WARMUP_SECONDS = 2;
/**
 * Before the first TLS case each server does this many seconds of full
 * handshakes: a handshake path runs ~1,700 times a second here, so V8 needs
 * about 10 s to compile it fully (measured: 450 µs per handshake in the
 * first 5 s after start, 350 µs from the 10th second on). nginx needs no
 * warm-up; it gets the same for symmetry.
 */
export const TLS_WARMUP_SECONDS = Number(process.env.BENCH_TLS_WARMUP ?? 10);

/** Full handshakes on the ECDSA port, not counted (see TLS_WARMUP_SECONDS). */
export async function warmTls(s: TlsServer): Promise<void> {
  await handshakeRun(s, s.ports.ecdsa, false, 0, 8, TLS_WARMUP_SECONDS);
}

/** One TLS connection carrying one request; resolves whether the session was resumed. */
function handshake(port: number, session: Buffer | undefined): Promise<{ reused: boolean; session?: Buffer }> {
  return new Promise((resolve, reject) => {
    let got: Buffer | undefined;
    let reused = false;
    const s = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false, session });
    s.on('session', (sess: Buffer) => { got = sess; });
    s.once('secureConnect', () => {
      // read while the TLS state exists; after close it is gone
      reused = s.isSessionReused();
      s.end('GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    });
    s.on('data', () => undefined);
    s.on('error', reject);
    s.on('close', () => resolve({ reused, session: got ?? session }));
  });
}

/** Handshakes for `seconds` with `concurrency` clients; CPU µs of the server per handshake and the share resumed. */
export async function handshakeRun(s: TlsServer, port: number, resume: boolean, seconds: number, concurrency = 8, warmup = WARMUP_SECONDS): Promise<{ cpuPerHandshake: number; count: number; resumedShare: number }> {
  let session: Buffer | undefined;
  if (resume) session = (await handshake(port, undefined)).session;
  // a second handshake lets TLS 1.3 deliver its ticket before we start counting
  if (resume) session = (await handshake(port, session)).session ?? session;
  const run = async (secs: number) => {
    const deadline = Date.now() + secs * 1000;
    let count = 0;
    let resumed = 0;
    await Promise.all(Array.from({ length: concurrency }, async () => {
      let mine = session;
      while (Date.now() < deadline) {
        const r = await handshake(port, resume ? mine : undefined);
        count++;
        if (r.reused) resumed++;
        if (resume && r.session) mine = r.session;
      }
    }));
    return { count, resumed };
  };
  // warm-up, as for the wrk cases: JIT compilation is not a per-handshake cost
  await run(warmup);
  const cpu0 = cpuMicros(s.pid);
  const { count, resumed } = await run(seconds);
  const cpu1 = cpuMicros(s.pid);
  return { cpuPerHandshake: (cpu1 - cpu0) / count, count, resumedShare: count ? resumed / count : 0 };
}

/** Keepalive requests over TLS with wrk: CPU µs per request and requests/s. */
export async function tlsKeepalive(s: TlsServer, seconds: number): Promise<{ cpuPerReq: number; rps: number }> {
  await wrkRun(s.ports.ecdsa, '/', WARMUP_SECONDS, 50, 'https');
  const cpu0 = cpuMicros(s.pid);
  const r = await wrkRun(s.ports.ecdsa, '/', seconds, 50, 'https');
  const cpu1 = cpuMicros(s.pid);
  return { cpuPerReq: (cpu1 - cpu0) / r.requests, rps: r.rps };
}

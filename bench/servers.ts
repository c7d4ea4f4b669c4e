/**
 * The benchmark's servers: an nginx origin (small, 64 KiB, 1 MiB and 100 MiB
 * responses) and a WebSocket echo origin (bench/ws.ts) on core 0, and the
 * proxy under test — nginx or Gatehouse with the same configuration, one
 * worker — pinned to core 1.
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { freePort, startGatehouse, startNginx, startServer, type RunningServer } from '../test/kit/server.ts';
import { processTree } from './proc.ts';

export interface BenchServer {
  kind: 'origin' | 'nginx' | 'gatehouse';
  port: number;
  /** The process whose tree is measured. */
  pid: number;
  core: number;
  /** The server's prefix directory. */
  prefix: string;
  stop(): Promise<void>;
}

const CORES = os.availableParallelism();
const PROXY_CORE = CORES > 1 ? 1 : 0;
const LOAD_CORE = 0;

/** Pins every process and thread of `pid`'s tree to `core`. */
export function pinTree(pid: number, core: number): void {
  for (const p of processTree(pid)) execFileSync('taskset', ['-a', '-p', '-c', String(core), String(p)], { stdio: 'ignore' });
}

export const SMALL_BODY = 'x'.repeat(99) + '\n';

export async function wrap(kind: BenchServer['kind'], s: RunningServer, port: number, core: number): Promise<BenchServer> {
  pinTree(s.pid, core);
  return { kind, port, pid: s.pid, core, prefix: s.prefix, stop: async () => { await s.stop(); } };
}

export async function startOrigin(): Promise<BenchServer> {
  const port = await freePort();
  const s = await startNginx({
    errorLogLevel: 'error',
    conf: `
worker_processes 1;
events { worker_connections 20000; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:${port} backlog=4096;
        location = /small { return 200 "${SMALL_BODY.trimEnd()}\\n"; }
        location / { root %%PREFIX%%/www; }
    }
}
`,
    files: { 'www/64k': Buffer.alloc(64 * 1024, 'a'), 'www/1m': Buffer.alloc(2 ** 20, 'a') },
  });
  // a 100 MiB file without holding it in memory here
  execFileSync('truncate', ['-s', String(100 * 2 ** 20), `${s.prefix}/www/100m`]);
  return wrap('origin', s, port, LOAD_CORE);
}

/**
 * The same proxy configuration for both servers. proxy_max_temp_file_size 0:
 * a body larger than proxy_buffers waits for the client instead of going to
 * a temporary file (nginx's default would write most of a 100 MiB body to
 * disk when the client reads more slowly than the origin sends;
 * bench/cases.ts watches proxy_temp to make sure nothing is written).
 */
function proxyConf(port: number, originPort: number, wsPort: number): string {
  return `
worker_processes 1;
events { worker_connections 20000; }
http {
    log_format bench '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $upstream_addr $upstream_response_time';
    access_log %%PREFIX%%/access.log bench buffer=64k;
    keepalive_requests 1000000;
    upstream origin {
        server 127.0.0.1:${originPort};
        keepalive 64;
    }
    upstream ws_origin {
        server 127.0.0.1:${wsPort};
    }
    server {
        listen 127.0.0.1:${port} backlog=4096;
        proxy_temp_path %%PREFIX%%/proxy_temp;
        proxy_max_temp_file_size 0;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }
        location /ws {
            proxy_pass http://ws_origin;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
        }
    }
}
`;
}

/** The proxy under test; `binary`: another Gatehouse tree's bin/gatehouse (bench/ab.ts). */
export async function startProxy(kind: 'nginx' | 'gatehouse', originPort: number, wsPort: number, binary?: string): Promise<BenchServer> {
  const port = await freePort();
  // a busy machine can take longer than the default 10 s to start a worker
  const opts = { conf: proxyConf(port, originPort, wsPort), errorLogLevel: 'error', timeoutMs: 60000 };
  const s = kind === 'nginx' ? await startNginx(opts) : binary ? await startServer(binary, opts) : await startGatehouse(opts);
  fs.mkdirSync(`${s.prefix}/proxy_temp`, { recursive: true });
  return wrap(kind, s, port, PROXY_CORE);
}

/** Node running a bench script on the load core. */
export function benchNode(args: string[]): ReturnType<typeof spawn> {
  const script = new URL(`./${args[0]}`, import.meta.url).pathname;
  return spawn('taskset', ['-c', String(LOAD_CORE), process.execPath, script, ...args.slice(1)], { stdio: ['ignore', 'pipe', 'inherit'] });
}

/** The WebSocket echo origin (bench/ws.ts), its own process on the load core. */
export async function startWsOrigin(): Promise<{ port: number; stop(): Promise<void> }> {
  const p = benchNode(['ws.ts', 'origin']);
  const port = await new Promise<number>((resolve, reject) => {
    p.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
    p.once('exit', (code) => reject(new Error(`bench: the WebSocket origin exited (${code})`)));
  });
  return { port, stop: async () => { p.kill(); } };
}

export { LOAD_CORE, PROXY_CORE };

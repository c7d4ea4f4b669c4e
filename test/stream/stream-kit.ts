// Helpers for the stream tests: TCP backends the proxy talks to, a client
// that records what it receives and how the connection ended, and log
// normalisation for comparing Gatehouse's lines with Debian nginx's.

import net from 'node:net';
import { freePort, nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import type { RunningServer, StartOptions } from '../kit/server.ts';

export interface Backend {
  port: number;
  /** Connections accepted so far. */
  accepted: number;
  close(): Promise<void>;
}

/** A TCP server on 127.0.0.1 running `onSocket` for each connection (half-open allowed). */
export async function startBackend(onSocket: (s: net.Socket) => void, port?: number): Promise<Backend> {
  const sockets = new Set<net.Socket>();
  const b = { port: port ?? await freePort(), accepted: 0 } as Backend;
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    b.accepted++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => { /* the proxy may reset */ });
    onSocket(s);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(b.port, '127.0.0.1', () => resolve());
  });
  b.close = () => new Promise((resolve) => {
    for (const s of sockets) s.destroy();
    server.close(() => resolve());
  });
  return b;
}

/** Echoes what it reads, upper-cased, and closes its side after the client's FIN. */
export const upperEcho = (s: net.Socket): void => {
  s.on('data', (d) => s.write(d.toString('latin1').toUpperCase(), 'latin1'));
  s.on('end', () => s.end());
};

export interface Exchange {
  /** Everything received, latin1. */
  data: string;
  /** How the server side ended: FIN, RST (or another error), or still open when we gave up. */
  end: 'fin' | 'reset' | 'open';
}

export interface ClientStep {
  send?: string;
  /** Close our side (FIN) after this step's data. */
  fin?: boolean;
  /** Wait until this much has been received in total before the next step. */
  until?: number;
  /** Pause before the next step. */
  delayMs?: number;
}

/**
 * Connects to 127.0.0.1:`port`, runs the steps (a FIN from the server does
 * not stop them: it may be a half-close), then waits for the server to end
 * the connection, up to `waitMs` in all.
 */
export function converse(port: number, steps: ClientStep[], waitMs = 5000): Promise<Exchange> {
  return new Promise((resolve) => {
    let data = '';
    let end: Exchange['end'] = 'open';
    let stepsDone = false;
    let done = false;
    let waiter: (() => void) | undefined;
    const s = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      resolve({ data, end });
    };
    const timer = setTimeout(finish, waitMs);
    s.on('data', (d) => { data += d.toString('latin1'); waiter?.(); });
    s.on('end', () => { end = 'fin'; if (stepsDone) finish(); });
    s.on('error', () => { end = 'reset'; finish(); });
    s.on('close', finish);
    s.on('connect', async () => {
      for (const step of steps) {
        if (done) return;
        if (step.send) s.write(step.send, 'latin1');
        if (step.fin) s.end();
        if (step.until !== undefined) {
          const want = step.until;
          await new Promise<void>((r) => {
            waiter = () => { if (data.length >= want) { waiter = undefined; r(); } };
            waiter();
          });
        }
        if (step.delayMs) await new Promise((r) => setTimeout(r, step.delayMs));
      }
      stepsDone = true;
      if (end === 'fin') finish();
    });
  });
}

/** Gatehouse and (when installed) Debian's nginx with its dynamic stream module: the reference runs. */
export const flavors = [
  { name: 'gatehouse', skip: false as string | false, start: (o: StartOptions) => startGatehouse(o) },
  { name: 'nginx', skip: nginxSkip, start: (o: StartOptions) => startNginx({ ...o, nginxModules: ['ngx_stream_module'] }) },
] as const;

/**
 * Error log lines matching `re`, without what differs between two runs:
 * time, pid#tid, connection numbers, and the given ports (named in `ports`).
 */
export function logLines(srv: RunningServer, re: RegExp, ports: Record<string, number>, file = 'error.log'): string[] {
  return srv.logLines(file).filter((l) => re.test(l)).map((l) => normalise(l.replace(/^\S+ \S+ (\[\w+\]) \d+#\d+: (\*\d+ )?/, '$1 '), ports));
}

/** Replaces port numbers by their names and client ports by `CPORT`. */
export function normalise(text: string, ports: Record<string, number>): string {
  let t = text;
  for (const [name, port] of Object.entries(ports)) t = t.replaceAll(`:${port}`, `:${name}`).replaceAll(` ${port} `, ` ${name} `);
  return t.replace(/127\.0\.0\.1:\d{4,5}\b/g, '127.0.0.1:CPORT');
}

/** Waits until `file` under the server's prefix has `n` lines, and returns them. */
export async function waitForLines(srv: RunningServer, file: string, n: number, timeoutMs = 5000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let lines: string[] = [];
    try { lines = srv.readFile(file).split('\n').filter(Boolean); } catch { /* not there yet */ }
    if (lines.length >= n || Date.now() > deadline) return lines;
    await new Promise((r) => setTimeout(r, 50));
  }
}

// A small, bounded load generator for reload / log-rotation / upgrade tests:
// `concurrency` loops sending `GET path HTTP/1.1` over raw loopback sockets
// for `durationMs`, counting every outcome. Not a benchmark.

import * as net from 'node:net';
import { parseNextFinal } from './client.ts';

export interface LoadOptions {
  port: number;
  /** Loopback only (default 127.0.0.1). */
  host?: string;
  path: string;
  concurrency: number;
  durationMs: number;
  /** Reuse connections (HTTP/1.1 keep-alive); false: `Connection: close`, one connection per request. */
  keepAlive: boolean;
  headers?: Record<string, string>;
  /** Per-request timeout (default 5000 ms). */
  requestTimeoutMs?: number;
  /**
   * keepAlive only: when a *reused* idle connection is closed or reset before
   * any byte of the response arrived (the server closed it as idle while the
   * request was in flight — what graceful reload does to idle keep-alive
   * connections), retry on a new connection, as real clients do, and count
   * it in `staleRetries` instead of `failed`. Default true.
   */
  retryStale?: boolean;
}

export interface LoadResult {
  /** Requests accounted for; always ok + failed. */
  sent: number;
  /** Complete responses with status 200. */
  ok: number;
  failed: number;
  /** One reason per failure (capped at 1000 entries), e.g. "ECONNRESET", "status 502", "premature close after 12 bytes". */
  errors: string[];
  /** Count of complete responses by status. */
  statuses: Record<number, number>;
  /** Stale keep-alive connections retried (see retryStale). */
  staleRetries: number;
  /** Connections opened. */
  connections: number;
}

type Outcome =
  | { kind: 'response'; status: number; keepOpen: boolean }
  | { kind: 'error'; reason: string; gotBytes: boolean };

class Conn {
  readonly sock: net.Socket;
  private buf: Buffer = Buffer.alloc(0);
  private ended = false;
  private error: NodeJS.ErrnoException | undefined;
  private wake: (() => void) | undefined;
  requests = 0;

  constructor(sock: net.Socket) {
    this.sock = sock;
    sock.on('data', (b: Buffer) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, b]) : b;
      this.wake?.();
    });
    sock.on('end', () => {
      this.ended = true;
      this.wake?.();
    });
    sock.on('close', () => {
      this.ended = true;
      this.wake?.();
    });
    sock.on('error', (e: NodeJS.ErrnoException) => {
      this.error ??= e;
      this.ended = true;
      this.wake?.();
    });
  }

  static open(port: number, host: string, timeoutMs: number): Promise<Conn | string> {
    return new Promise((resolve) => {
      const sock = net.connect({ port, host });
      const t = setTimeout(() => {
        sock.destroy();
        resolve('connect timeout');
      }, timeoutMs);
      sock.once('connect', () => {
        clearTimeout(t);
        sock.removeAllListeners('error');
        resolve(new Conn(sock));
      });
      sock.once('error', (e: NodeJS.ErrnoException) => {
        clearTimeout(t);
        resolve(e.code ?? e.message);
      });
    });
  }

  get usable(): boolean {
    return !this.ended && !this.sock.destroyed;
  }

  async request(bytes: Buffer, timeoutMs: number): Promise<Outcome> {
    this.requests++;
    this.buf = Buffer.alloc(0);
    if (!this.usable) return { kind: 'error', reason: this.error?.code ?? 'connection closed', gotBytes: false };
    this.sock.write(bytes);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      let parsed;
      try {
        parsed = parseNextFinal(this.buf, { eof: this.ended && this.buf.length > 0 });
      } catch (e) {
        return { kind: 'error', reason: `malformed response: ${(e as Error).message}`, gotBytes: true };
      }
      if (parsed) {
        const r = parsed.response;
        if (!r.complete) {
          return { kind: 'error', reason: `premature close after ${this.buf.length} bytes (incomplete body)`, gotBytes: true };
        }
        const conn = (r.header('connection') ?? '').toLowerCase();
        const keepOpen = !this.ended && r.httpVersion === '1.1' && !conn.split(',').some((t) => t.trim() === 'close');
        return { kind: 'response', status: r.status, keepOpen };
      }
      if (this.ended) {
        const gotBytes = this.buf.length > 0;
        const reason = this.error?.code ?? (gotBytes ? `premature close after ${this.buf.length} bytes` : 'closed without response');
        return { kind: 'error', reason, gotBytes };
      }
      const left = deadline - Date.now();
      if (left <= 0) return { kind: 'error', reason: 'timeout', gotBytes: this.buf.length > 0 };
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }

  close(): void {
    this.sock.destroy();
  }
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const host = opts.host ?? '127.0.0.1';
  if (!isLoopback(host)) throw new Error(`runLoad: loopback only, got host ${host}`);
  if (!(opts.concurrency >= 1) || !(opts.durationMs >= 0)) throw new Error('runLoad: concurrency >= 1 and durationMs >= 0 required');
  const timeoutMs = opts.requestTimeoutMs ?? 5000;
  const retryStale = opts.retryStale ?? true;
  const result: LoadResult = { sent: 0, ok: 0, failed: 0, errors: [], statuses: {}, staleRetries: 0, connections: 0 };

  let head = `GET ${opts.path} HTTP/1.1\r\nHost: localhost\r\n`;
  for (const [k, v] of Object.entries(opts.headers ?? {})) head += `${k}: ${v}\r\n`;
  if (!opts.keepAlive) head += 'Connection: close\r\n';
  const bytes = Buffer.from(`${head}\r\n`, 'latin1');

  const fail = (reason: string): void => {
    result.sent++;
    result.failed++;
    if (result.errors.length < 1000) result.errors.push(reason);
  };

  const deadline = Date.now() + opts.durationMs;
  const worker = async (): Promise<void> => {
    let conn: Conn | undefined;
    while (Date.now() < deadline) {
      if (conn && !conn.usable) {
        conn.close();
        conn = undefined;
      }
      const reused = conn !== undefined;
      if (!conn) {
        const c = await Conn.open(opts.port, host, timeoutMs);
        if (typeof c === 'string') {
          fail(c);
          await new Promise((r) => setTimeout(r, 5)); // don't spin on ECONNREFUSED
          continue;
        }
        result.connections++;
        conn = c;
      }
      const out = await conn.request(bytes, timeoutMs);
      if (out.kind === 'error') {
        conn.close();
        conn = undefined;
        if (reused && retryStale && !out.gotBytes) {
          result.staleRetries++;
          continue;
        }
        fail(out.reason);
        continue;
      }
      result.sent++;
      result.statuses[out.status] = (result.statuses[out.status] ?? 0) + 1;
      if (out.status === 200) result.ok++;
      else {
        result.failed++;
        if (result.errors.length < 1000) result.errors.push(`status ${out.status}`);
      }
      if (!opts.keepAlive || !out.keepOpen) {
        conn.close();
        conn = undefined;
      }
    }
    conn?.close();
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  return result;
}

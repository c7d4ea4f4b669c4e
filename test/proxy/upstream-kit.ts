/**
 * Test upstreams for the proxy tests: a raw TCP (or unix socket) server that
 * records every request byte for byte and answers with whatever bytes a test
 * scripts, plus helpers to run Gatehouse and Debian's nginx side by side on
 * one configuration (the reference for what an upstream and a client see).
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import type { RunningServer, StartOptions } from '../kit/server.ts';

export interface UpstreamRequest {
  /** Request line and header fields, as received (ends with the empty line). */
  head: string;
  method: string;
  uri: string;
  /** The body, de-chunked when it came chunked. */
  body: Buffer;
  /** Bytes of the body as received (chunk framing included). */
  rawBody: Buffer;
  /** Header fields in order, names as sent. */
  headers: Array<[string, string]>;
  /** Which connection it came on (counting from 1) and its number on it. */
  connection: number;
  index: number;
}

/** Answers one request: write to `socket` (and end it to close the connection). */
export type Reply = (req: UpstreamRequest, socket: net.Socket) => void | Promise<void>;

export class RawUpstream {
  readonly server: net.Server;
  /** TCP port, or 0 for a unix socket. */
  readonly port: number;
  readonly path: string | undefined;
  readonly requests: UpstreamRequest[] = [];
  /** Connections accepted so far. */
  connections = 0;
  reply: Reply;
  /** Requests for which the body is not waited for (an upstream that answers after the head). */
  headOnly: (head: string) => boolean = () => false;
  private readonly sockets = new Set<net.Socket>();

  private constructor(server: net.Server, port: number, sockPath: string | undefined, reply: Reply) {
    this.server = server;
    this.port = port;
    this.path = sockPath;
    this.reply = reply;
  }

  /** Starts an upstream on 127.0.0.1 (or a unix socket when `unix` is set). */
  static async start(reply: Reply, opts: { unix?: boolean } = {}): Promise<RawUpstream> {
    const server = net.createServer({ allowHalfOpen: true });
    let sockPath: string | undefined;
    if (opts.unix) {
      sockPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-up-')), 's.sock');
      await new Promise<void>((res) => server.listen(sockPath, res));
      fs.chmodSync(path.dirname(sockPath), 0o755);
      fs.chmodSync(sockPath, 0o777);
    } else {
      await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    }
    const port = opts.unix ? 0 : (server.address() as net.AddressInfo).port;
    const up = new RawUpstream(server, port, sockPath, reply);
    server.on('connection', (s) => up.serve(s));
    return up;
  }

  /** `127.0.0.1:PORT` or `unix:/path`, for proxy_pass and server lines. */
  get address(): string {
    return this.path ? `unix:${this.path}` : `127.0.0.1:${this.port}`;
  }

  private serve(socket: net.Socket): void {
    const conn = ++this.connections;
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    let index = 0;
    let busy = false;
    const pump = async (): Promise<void> => {
      if (busy) return;
      busy = true;
      try {
        for (;;) {
          const req = parseRequest(buf, this.headOnly);
          if (!req) break;
          buf = buf.subarray(req.consumed);
          const r: UpstreamRequest = { ...req.request, connection: conn, index: ++index };
          this.requests.push(r);
          await this.reply(r, socket);
          if (socket.destroyed || socket.writableEnded) break;
        }
      } finally {
        busy = false;
      }
    };
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      void pump();
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((res) => this.server.close(() => res()));
    if (this.path) fs.rmSync(path.dirname(this.path), { recursive: true, force: true });
  }
}

/** Parses one request from `buf` (Content-Length or chunked body); undefined until complete. */
function parseRequest(buf: Buffer, headOnly: (head: string) => boolean): { request: Omit<UpstreamRequest, 'connection' | 'index'>; consumed: number } | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = buf.subarray(0, end + 4).toString('latin1');
  const lines = head.split('\r\n').slice(0, -2);
  const [method, uri] = lines[0].split(' ');
  const headers: Array<[string, string]> = lines.slice(1).map((l) => {
    const c = l.indexOf(':');
    return [l.slice(0, c), l.slice(c + 1).trim()];
  });
  const get = (n: string) => headers.find(([k]) => k.toLowerCase() === n)?.[1];
  let pos = end + 4;
  if (headOnly(head)) return { request: { head, method, uri, headers, body: Buffer.alloc(0), rawBody: Buffer.alloc(0) }, consumed: pos };
  if (get('transfer-encoding')?.toLowerCase() === 'chunked') {
    const parts: Buffer[] = [];
    for (;;) {
      const lf = buf.indexOf('\r\n', pos);
      if (lf < 0) return undefined;
      const size = parseInt(buf.subarray(pos, lf).toString('latin1'), 16);
      if (buf.length < lf + 2 + size + 2) return undefined;
      if (size === 0) {
        const fin = buf.indexOf('\r\n\r\n', lf);
        if (fin < 0 && buf.subarray(lf, lf + 4).toString() !== '\r\n\r\n') return undefined;
        const stop = buf.subarray(lf, lf + 4).toString() === '\r\n\r\n' ? lf + 4 : fin + 4;
        return { request: { head, method, uri, headers, body: Buffer.concat(parts), rawBody: buf.subarray(end + 4, stop) }, consumed: stop };
      }
      parts.push(buf.subarray(lf + 2, lf + 2 + size));
      pos = lf + 2 + size + 2;
    }
  }
  const len = Number(get('content-length') ?? 0);
  if (buf.length < pos + len) return undefined;
  const body = buf.subarray(pos, pos + len);
  return { request: { head, method, uri, headers, body, rawBody: body }, consumed: pos + len };
}

/** A complete response with a body and Content-Length. */
export function response(body = 'ok', status = '200 OK', headers: string[] = []): string {
  return `HTTP/1.1 ${status}\r\n${headers.map((h) => h + '\r\n').join('')}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/** Replies with `text` and closes the connection. */
export function replyWith(text: string | ((req: UpstreamRequest) => string)): Reply {
  return (req, socket) => {
    socket.end(typeof text === 'string' ? text : text(req), 'latin1');
  };
}

export interface Pair {
  gh: RunningServer;
  ng: RunningServer | undefined;
}

/** Gatehouse and (when installed) nginx on one configuration; both stopped after `t`. */
export async function startPair(t: { after(fn: () => unknown): void }, opts: StartOptions): Promise<Pair> {
  const gh = await startGatehouse(opts);
  t.after(() => gh.stop());
  let ng: RunningServer | undefined;
  if (!nginxSkip) {
    ng = await startNginx(opts);
    t.after(() => ng!.stop());
  }
  return { gh, ng };
}

/** The config's http-level lines every proxy test uses: logs and temp paths inside the prefix. */
export const HTTP_COMMON = `
    access_log %%PREFIX%%/access.log;
    client_body_temp_path %%PREFIX%%/client_body_temp;
    proxy_temp_path %%PREFIX%%/proxy_temp;
`;

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * For the data-plane tests: loopback origins that answer with what they
 * received (method, URI, headers, their own port) as JSON, a raw HTTP
 * client for the gateway's proxy port, and a wait for a configuration
 * change to reach the proxy (the Admin API answers before the workers
 * applied the change: the wait is for the first request routed the new way).
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Gateway } from './harness.ts';

export interface Seen {
  port: number;
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface Origin {
  port: number;
  node: string;
  /** Requests it received. */
  seen: Seen[];
  server: http.Server;
  close(): Promise<void>;
}

/** An origin answering 200 with a JSON echo; `handler` may answer instead (return true when it did). */
export async function startOrigin(handler?: (req: http.IncomingMessage, res: http.ServerResponse, body: string) => boolean): Promise<Origin> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      const port = (server.address() as AddressInfo).port;
      const s: Seen = { port, method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      seen.push(s);
      if (handler?.(req, res, body)) return;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(s));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port, node: `127.0.0.1:${port}`, seen, server,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

export interface ProxyReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The origin's echo, when the body is one. */
  echo: Seen | undefined;
}

/** One request to the gateway's proxy port (a new connection each time). */
export function proxy(gw: Gateway, path: string, opts: { method?: string; headers?: http.OutgoingHttpHeaders; body?: string } = {}): Promise<ProxyReply> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port: gw.proxyPort, path, method: opts.method ?? 'GET', headers: opts.headers, agent: false,
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        let echo: Seen | undefined;
        try {
          const j = JSON.parse(body) as Seen;
          if (j && typeof j.port === 'number' && typeof j.url === 'string') echo = j;
        } catch { /* not an echo */ }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, echo });
      });
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** Sends `path` until `ok` holds for the answer (a change reaching the workers), at most `ms`. */
export async function untilRouted(gw: Gateway, path: string, ok: (r: ProxyReply) => boolean,
  opts: { method?: string; headers?: http.OutgoingHttpHeaders; body?: string } = {}, ms = 10_000): Promise<ProxyReply> {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await proxy(gw, path, opts);
    if (ok(r)) return r;
    if (Date.now() > deadline) throw new Error(`not routed as expected within ${ms} ms: ${r.status} ${r.body}`);
    await sleep(10);
  }
}

/** PUT through the Admin API, asserting success. */
export async function put(gw: Gateway, uri: string, body: unknown): Promise<void> {
  const r = await gw.admin('PUT', `/gateway/admin/${uri}`, body);
  if (r.status !== 200 && r.status !== 201) throw new Error(`PUT ${uri}: ${r.status} ${r.text}`);
}

export interface HoldingOrigin extends Origin {
  /** Resolves once a `?hold` request is held, with the function that answers it (`held`). */
  holding(): Promise<() => void>;
}

/** An echo origin that holds requests whose URI has `hold` until the test answers them. */
export async function startHoldingOrigin(): Promise<HoldingOrigin> {
  const held: Array<() => void> = [];
  const waiting: Array<(release: () => void) => void> = [];
  const origin = await startOrigin((req, res) => {
    if (!req.url?.includes('hold')) return false;
    const release = () => res.end('held');
    const w = waiting.shift();
    if (w) w(release);
    else held.push(release);
    return true;
  });
  return {
    ...origin,
    holding: () => new Promise((resolve) => {
      const h = held.shift();
      if (h) resolve(h);
      else waiting.push(resolve);
    }),
  };
}

/** A route for `uri` with `plugins`, proxied to `origin`. */
export function routeTo(origin: Origin, uri: string, plugins: Record<string, unknown>): Record<string, unknown> {
  return { uri, plugins, upstream: { type: 'roundrobin', nodes: { [origin.node]: 1 } } };
}

/** The Admin API refuses a route with `plugins`: 400 and APISIX's `error_msg`. */
export async function assertRefused(gw: Gateway, origin: Origin, plugins: Record<string, unknown>, message: string): Promise<void> {
  const r = await gw.admin('PUT', '/gateway/admin/routes/refused', routeTo(origin, '/refused', plugins));
  assert.equal(r.status, 400, JSON.stringify(plugins));
  assert.deepEqual(r.json, { error_msg: message });
}

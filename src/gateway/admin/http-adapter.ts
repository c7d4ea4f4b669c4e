/**
 * The one place the Admin API meets the engine's request interface: it
 * turns an HttpRequest into an AdminRequest (reading the body), and an
 * AdminResponse into a response. The request interface is being reworked
 * (issue 9, reqcore); only this file has to follow.
 */
import fs from 'node:fs';
import { DONE } from '../../http/http-conf.ts';
import type { HttpRequest } from '../../http/request.ts';
import { hasRequestBody, readRequestBody } from '../../http/request-body.ts';
import { sendSimple } from '../../http/response.ts';
import { CORS_HEADERS, MAX_BODY, NGINX_NOT_FOUND, PREFLIGHT } from './api.ts';
import type { AdminRequest, AdminResponse } from './context.ts';

export interface AdminEndpoint {
  handle(req: AdminRequest): Promise<AdminResponse>;
  statusReport(): Promise<AdminResponse>;
  /** The prometheus plugin's metrics of every worker, in Prometheus' text format. */
  metricsReport(): Promise<string>;
  cors: boolean;
  serverHeader: string;
}

/** The request's body, or the HTTP status reading it failed with. */
async function bodyOf(r: HttpRequest): Promise<{ body: Buffer | undefined; length: number } | number> {
  if (!hasRequestBody(r)) return { body: undefined, length: 0 };
  const rb = await readRequestBody(r);
  if (typeof rb === 'number') return rb;
  if (rb.file === undefined) return { body: rb.bufs.length === 1 ? rb.bufs[0] : Buffer.concat(rb.bufs), length: rb.length };
  // a body over the Admin API's limit is refused by its size; it is not read into memory
  if (rb.length > MAX_BODY) return { body: undefined, length: rb.length };
  return { body: await fs.promises.readFile(rb.file), length: rb.length };
}

function headersOf(r: HttpRequest): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  const list = r.headersIn;
  for (let i = 0; i < list.length; i += 2) {
    const name = list[i].toLowerCase();
    const had = out[name];
    out[name] = had === undefined ? list[i + 1] : `${had}, ${list[i + 1]}`;
  }
  return out;
}

async function send(r: HttpRequest, endpoint: AdminEndpoint, res: AdminResponse): Promise<number> {
  if (res === NGINX_NOT_FOUND) return 404;
  r.ownServer = true;
  r.addHeader('Server', endpoint.serverHeader);
  if (endpoint.cors) for (const [k, v] of Object.entries(CORS_HEADERS)) r.addHeader(k, v);
  for (const [k, v] of Object.entries(res.headers ?? {})) r.addHeader(k, v);
  if (res.apiVersion) r.addHeader('X-API-VERSION', 'v3');
  const body = res.body === undefined ? '' : typeof res.body === 'string' ? res.body : JSON.stringify(res.body) + '\n';
  await sendSimple(r, res.status, Buffer.from(body, 'utf8'), res.contentType ?? 'application/json');
  return DONE;
}

/** The content handler of `gateway_admin`. */
export async function serveAdmin(r: HttpRequest, endpoint: AdminEndpoint): Promise<number> {
  if (endpoint.cors && r.method === 'OPTIONS') return send(r, endpoint, PREFLIGHT);
  const body = await bodyOf(r);
  if (typeof body === 'number') return body;
  const req: AdminRequest = {
    method: r.method,
    path: r.uri,
    args: new URLSearchParams(r.args),
    headers: headersOf(r),
    body: body.body,
    bodyLength: body.length,
  };
  return send(r, endpoint, await endpoint.handle(req));
}

/** The content handler of `gateway_metrics`: the prometheus plugin's export (no CORS, no API version). */
export async function serveMetrics(r: HttpRequest, endpoint: AdminEndpoint): Promise<number> {
  if (r.method !== 'GET' && r.method !== 'HEAD') return 405;
  r.ownServer = true;
  r.addHeader('Server', endpoint.serverHeader);
  await sendSimple(r, 200, Buffer.from(await endpoint.metricsReport(), 'utf8'), 'text/plain; charset=utf-8');
  return DONE;
}

/** The content handler of `gateway_status`: the store's revision and each worker's. */
export async function serveStatus(r: HttpRequest, endpoint: AdminEndpoint): Promise<number> {
  if (r.method !== 'GET' && r.method !== 'HEAD') return 405;
  return send(r, endpoint, await endpoint.statusReport());
}

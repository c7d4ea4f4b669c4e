/**
 * The Admin API's front (apisix/admin/init.lua run()): admin CORS, the
 * token check, splitting the URL into resource / id / sub-path, the early
 * errors in APISIX's order (stream mode, unknown resource, body size, bad
 * JSON, bad ttl), then the resource's handler.
 */
import type { AdminContext, AdminRequest, AdminResponse } from './context.ts';
import { resources } from './index.ts';
import { validateConfigs } from './config-validate.ts';
import { decodeJson } from './json-body.ts';
import { pluginSchema, pluginsList, pluginsReload, resourceSchema, validateAgainst } from './plugins-api.ts';
import type { Method } from './resource.ts';

/** apisix/admin/init.lua MAX_REQ_BODY: 1.5 MiB. */
export const MAX_BODY = 1024 * 1024 * 1.5;
export const ADMIN_PATH = '/gateway/admin';

/** Answers with this status are nginx's own page (a path the admin router does not route). */
export const NGINX_NOT_FOUND: AdminResponse = { status: 404, body: undefined };

const METHODS = new Set(['get', 'put', 'post', 'patch', 'delete']);

/** `api_key` query, else `X-API-KEY`, else the `x_api_key` cookie: the first present wins. */
function tokenOf(req: AdminRequest): string | undefined {
  const q = req.args.get('api_key');
  if (q !== null) return q;
  if (req.headers['x-api-key'] !== undefined) return req.headers['x-api-key'];
  const cookie = req.headers.cookie;
  if (!cookie) return undefined;
  for (const part of cookie.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === 'x_api_key') return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** undefined when the request may go on, else the 401's description. */
function tokenError(ctx: AdminContext, req: AdminRequest): string | undefined {
  const s = ctx.settings;
  if (!s.keyRequired || s.keys === undefined) return undefined;
  const token = tokenOf(req);
  if (token === undefined) return 'missing apikey';
  const row = s.keys.find((k) => k.key === token);
  if (!row) return 'wrong apikey';
  if (row.role === 'viewer' && req.method !== 'GET') return 'invalid method for role viewer';
  return undefined;
}

function bodyOf(req: AdminRequest): { value: unknown } | AdminResponse {
  if (req.bodyLength > MAX_BODY) {
    return { status: 400, body: { error_msg: `invalid request body: request size ${req.bodyLength} is greater than the maximum size ${MAX_BODY} allowed` } };
  }
  if (req.body === undefined || req.body.length === 0) return { value: undefined };
  const text = req.body.toString('utf8');
  const decoded = decodeJson(text);
  if ('error' in decoded) return { status: 400, body: { error_msg: `invalid request body: ${decoded.error}`, req_body: text } };
  return decoded;
}

export async function handleAdmin(ctx: AdminContext, req: AdminRequest): Promise<AdminResponse> {
  const path = req.path;
  if (path === ADMIN_PATH) return req.method === 'HEAD' ? { status: 200 } : NGINX_NOT_FOUND;
  if (!path.startsWith(ADMIN_PATH + '/')) return NGINX_NOT_FOUND;
  const unauthorized = tokenError(ctx, req);
  if (unauthorized) return { status: 401, body: { error_msg: 'failed to check token', description: unauthorized } };

  const segs = path.split('/');
  while (segs.length > 0 && segs[segs.length - 1] === '') segs.pop();
  // ['', 'gateway', 'admin', resource, id, ...sub-path]
  let res = segs[3] ?? '';
  let id: string | undefined = segs[4];
  let subPath = segs.slice(5).join('/');

  if (res === 'plugins' && id === 'list' && segs.length === 5) {
    const r = pluginsList(ctx, req.method, req.args);
    if (r) return r;
  }
  if (res === 'plugins' && id === 'reload' && segs.length === 5) return pluginsReload(req.method);
  if (res === 'schema' && id === 'plugins') return pluginSchema(ctx, req.method, segs[5], req.args);

  if (res === 'stream_routes' && ctx.settings.proxyMode !== 'stream' && ctx.settings.proxyMode !== 'http&stream') {
    return { status: 400, body: { error_msg: 'stream mode is disabled, can not add stream routes' } };
  }
  if (res === 'consumers' && segs[5] === 'credentials') {
    subPath = `${id}/${segs.slice(7).join('/')}`;
    res = 'credentials';
    id = segs[6];
  }
  if (res === 'secrets' && id !== undefined && segs.length <= 5 && (req.method === 'PATCH' || req.method === 'DELETE')) {
    // `/secrets/vault`: the manager without the secret's id
    return { status: 400, body: { error_msg: req.method === 'PATCH' ? 'no secret id' : 'missing secret id' }, apiVersion: true };
  }
  if (res === 'secrets' && id !== undefined && segs.length > 5) {
    id = `${id}/${segs[5]}`;
    subPath = segs.slice(6).join('/');
  }
  if (res === 'configs' && id === 'validate' && segs.length === 5) {
    const body = bodyOf(req);
    if (!('value' in body)) return body;
    return validateConfigs(ctx, req.method, body.value, req.bodyLength);
  }
  const resource = resources[res];
  if (!resource && res !== 'plugins' && res !== 'schema') return { status: 404, body: { error_msg: `Unsupported resource type: ${res}` } };
  const method = req.method.toLowerCase();
  if (!resource && method !== 'get' && !(res === 'schema' && id === 'validate' && method === 'post')) return { status: 404, body: { error_msg: 'not found' } };
  if (resource && !METHODS.has(method)) return { status: 404, body: { error_msg: 'not found' } };

  const body = bodyOf(req);
  if (!('value' in body)) return body;
  const ttl = req.args.get('ttl');
  if (ttl !== null && (ttl.trim() === '' || Number.isNaN(Number(ttl)))) {
    return { status: 400, body: { error_msg: 'invalid argument ttl: should be a number' } };
  }

  if (res === 'plugins') return pluginSchema(ctx, req.method, id, req.args);
  if (res === 'schema') return id === 'validate' ? validateAgainst(req.method, segs[5], body.value) : resourceSchema(req.method, id);
  return resource.handle({ method: method as Method, id, subPath, body: body.value, args: req.args }, ctx);
}

/** Headers every admin answer carries when admin CORS is on. */
export const CORS_HEADERS: Record<string, string> = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Credentials': 'true',
  'Access-Control-Expose-Headers': '*',
  'Access-Control-Max-Age': '3600',
};

/** OPTIONS with admin CORS on: 200, empty, no token needed. */
export const PREFLIGHT: AdminResponse = {
  status: 200, body: '', contentType: 'text/plain',
  headers: { 'Access-Control-Allow-Methods': 'POST, GET, PUT, OPTIONS, DELETE, PATCH', 'Access-Control-Allow-Headers': '*' },
};

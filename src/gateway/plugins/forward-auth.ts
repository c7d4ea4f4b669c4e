/**
 * forward-auth (apisix/plugins/forward-auth.lua): in the access phase the
 * request is described to the auth service at `uri` (X-Forwarded-Proto,
 * -Method, -Host, -Uri, -For, the `request_headers` the client sent,
 * `extra_headers` with $vars resolved; with POST the client's body and its
 * Content-Encoding). A status under 300 lets the request go on with the
 * service's `upstream_headers` set on it (a listed header the service did
 * not send is removed, so a client cannot forge it); any other status goes
 * to the client with the service's body and its `client_headers`. No answer
 * at all: `status_on_error`, or on without auth with `allow_degradation`.
 * As lua-resty-http asks: Host is the URI's (with a port that is not the
 * scheme's default), `timeout` bounds each step (connect, send, read).
 */
import http from 'node:http';
import https from 'node:https';
import type { GatewayPlugin } from './registry.ts';
import type { PluginContext } from './phase-api.ts';
import { resolveVar } from './resolve-var.ts';
import { httpCall, serverOf, type HttpAnswer } from './http-call.ts';

interface ForwardAuthConf {
  uri: string;
  allow_degradation: boolean;
  status_on_error: number;
  ssl_verify: boolean;
  request_method: 'GET' | 'POST';
  max_req_body_size: number;
  request_headers: string[];
  extra_headers?: Record<string, string>;
  upstream_headers: string[];
  client_headers: string[];
  timeout: number;
  keepalive: boolean;
  keepalive_timeout: number;
  keepalive_pool: number;
}


const USER_AGENT = 'lua-resty-http/0.17.2 (Lua) ngx_lua/10026';

/** Keepalive pools by (secure, timeout, size): a connection is kept as set_keepalive keeps it. */
const agents = new Map<string, http.Agent>();

function agentFor(conf: ForwardAuthConf, secure: boolean): http.Agent | undefined {
  if (!conf.keepalive) return undefined;
  const key = `${secure}\0${conf.keepalive_timeout}\0${conf.keepalive_pool}\0${conf.ssl_verify}`;
  let a = agents.get(key);
  if (!a) {
    const opts = { keepAlive: true, maxFreeSockets: conf.keepalive_pool, timeout: conf.keepalive_timeout };
    a = secure ? new https.Agent({ ...opts, rejectUnauthorized: conf.ssl_verify }) : new http.Agent(opts);
    agents.set(key, a);
  }
  return a;
}

/** request_uri: one exchange with the auth service; rejects when there is no answer. */
async function ask(conf: ForwardAuthConf, headers: Record<string, string>, body: Buffer | undefined): Promise<HttpAnswer> {
  const url = new URL(conf.uri);
  const { port, secure } = serverOf(url);
  const out: Record<string, string | number> = {};
  const names = new Set(Object.keys(headers).map((k) => k.toLowerCase()));
  if (!names.has('host')) out.Host = url.port === '' ? url.hostname : `${url.hostname}:${port}`;
  if (!names.has('user-agent')) out['User-Agent'] = USER_AGENT;
  Object.assign(out, headers);
  if (body !== undefined) out['Content-Length'] = body.length;
  else if (conf.request_method === 'POST') out['Content-Length'] = 0;
  return httpCall(url, {
    method: conf.request_method, headers: out, body, timeoutMs: conf.timeout, sslVerify: conf.ssl_verify, agent: agentFor(conf, secure),
  });
}

/** The request as the auth service is told of it (auth_headers in the Lua). */
function authHeaders(conf: ForwardAuthConf, ctx: PluginContext): Record<string, string> {
  const h: Record<string, string | undefined> = {
    'X-Forwarded-Proto': ctx.variable('scheme'),
    'X-Forwarded-Method': ctx.method,
    'X-Forwarded-Host': ctx.variable('host'),
    'X-Forwarded-Uri': ctx.variable('request_uri'),
    'X-Forwarded-For': ctx.variable('remote_addr'),
  };
  // the body is read whole and sent with a length of its own: only its encoding is kept
  if (conf.request_method === 'POST') h['Content-Encoding'] = ctx.header('content-encoding');
  for (const [name, value] of Object.entries(conf.extra_headers ?? {})) h[name] = resolveVar(String(value), ctx);
  for (const name of conf.request_headers) if (h[name] === undefined) h[name] = ctx.header(name);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k] = v;
  return out;
}

export const forwardAuth: GatewayPlugin<ForwardAuthConf> = {
  name: 'forward-auth', version: 0.1, priority: 2002,
  schema: {
    type: 'object',
    properties: {
      uri: { type: 'string' },
      allow_degradation: { type: 'boolean', default: false },
      status_on_error: { type: 'integer', minimum: 200, maximum: 599, default: 403 },
      ssl_verify: { type: 'boolean', default: true },
      request_method: { type: 'string', default: 'GET', enum: ['GET', 'POST'], description: 'the method for client to request the authorization service' },
      max_req_body_size: {
        type: 'integer', minimum: 1, default: 67108864,
        description: 'maximum request body size in bytes buffered and forwarded to the authorization service when request_method is POST',
      },
      request_headers: { type: 'array', default: [], items: { type: 'string' }, description: 'client request header that will be sent to the authorization service' },
      extra_headers: {
        type: 'object', minProperties: 1,
        patternProperties: { '^[^:]+$': { type: 'string', description: 'header value as a string; may contain variableslike $remote_addr, $request_uri' } },
        description: 'extra headers sent to the authorization service; values must be strings and can include variableslike $remote_addr, $request_uri.',
      },
      upstream_headers: { type: 'array', default: [], items: { type: 'string' }, description: 'authorization response header that will be sent to the upstream' },
      client_headers: { type: 'array', default: [], items: { type: 'string' }, description: 'authorization response header that will be sent tothe client when authorizing failed' },
      timeout: { type: 'integer', minimum: 1, maximum: 60000, default: 3000, description: 'timeout in milliseconds' },
      keepalive: { type: 'boolean', default: true },
      keepalive_timeout: { type: 'integer', minimum: 1000, default: 60000 },
      keepalive_pool: { type: 'integer', minimum: 1, default: 5 },
    },
    required: ['uri'],
  },
  async access(conf, ctx) {
    const headers = authHeaders(conf, ctx);
    let body: Buffer | undefined;
    if (conf.request_method === 'POST') {
      const b = await ctx.requestBody(conf.max_req_body_size);
      if (!Buffer.isBuffer(b)) return { status: 413 };
      body = b;
    }
    let res: HttpAnswer;
    try {
      res = await ask(conf, headers, body);
    } catch {
      return conf.allow_degradation ? undefined : { status: conf.status_on_error };
    }
    if (res.status >= 300) {
      for (const name of conf.client_headers) {
        const values = res.headers[name.toLowerCase()];
        if (!values) continue;
        ctx.setResponseHeader(name, values[0]);
        for (const v of values.slice(1)) ctx.addResponseHeader(name, v);
      }
      return { status: res.status, body: res.body };
    }
    for (const name of conf.upstream_headers) {
      const values = res.headers[name.toLowerCase()];
      ctx.setRequestHeader(name, values?.[0]);
      for (const v of values?.slice(1) ?? []) ctx.addRequestHeader(name, v);
    }
    return undefined;
  },
};

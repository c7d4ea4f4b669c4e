/**
 * proxy-mirror (apisix/plugins/proxy-mirror.lua): in the rewrite phase, for
 * `sample_ratio` of the requests, the mirror's URI is chosen: `host` then
 * the request's URI, or `path` instead of its path (`replace`, the
 * arguments kept) or before it (`prefix`). After every access function the
 * request (method, headers as the plugins left them, body) is sent there
 * as nginx's `mirror` subrequest sends it (Host as upstream, Connection
 * close) and its answer is dropped; the client gets the upstream's. A
 * mirror that fails or is slow changes nothing for the client.
 */
import { httpCall } from './http-call.ts';
import type { GatewayPlugin } from './registry.ts';
import type { PluginContext } from './phase-api.ts';

interface ProxyMirrorConf { host: string; path?: string; path_concat_mode: 'replace' | 'prefix'; sample_ratio: number }

/** Per request: the mirror URI chosen in rewrite (ctx.var.upstream_mirror_uri). */
const chosen = {};

/** proxy_read_timeout and the others' default for /proxy_mirror (60s). */
const MIRROR_TIMEOUT = 60_000;

/** Headers nginx's proxy module does not pass on as they came (it sets its own framing and Connection). */
const DROPPED = new Set(['host', 'connection', 'keep-alive', 'content-length', 'transfer-encoding', 'expect', 'upgrade', 'te']);

function mirrorUri(conf: ProxyMirrorConf, ctx: PluginContext): string {
  let uri = ctx.upstreamUri;
  if (conf.path !== undefined) {
    if (conf.path_concat_mode === 'prefix') uri = conf.path + uri;
    else {
      const q = uri.indexOf('?');
      uri = conf.path + (q < 0 ? '' : uri.slice(q));
    }
  }
  return conf.host + uri;
}

/** Sends the mirrored request; every outcome is ignored. */
function send(target: string, ctx: PluginContext, body: Buffer | undefined): void {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return;
  }
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(ctx.requestHeaders())) if (!DROPPED.has(k)) headers[k] = v;
  const host = ctx.upstreamHost ?? ctx.header('host');
  if (host !== undefined) headers.host = host;
  headers.connection = 'close';
  if (body !== undefined && body.length > 0) headers['content-length'] = String(body.length);
  // the mirror's failure is not the client's
  httpCall(url, { method: ctx.method, headers, body, timeoutMs: MIRROR_TIMEOUT, sslVerify: false, discardBody: true }).catch(() => undefined);
}

export const proxyMirror: GatewayPlugin<ProxyMirrorConf> = {
  name: 'proxy-mirror', version: 0.1, priority: 1010,
  schema: {
    type: 'object',
    properties: {
      host: { type: 'string', pattern: '^(http(s)?|grpc(s)?):\\/\\/([\\da-zA-Z.-]+|\\[[\\da-fA-F:]+\\])(:\\d+)?$' },
      path: { type: 'string', pattern: '^/[^?&]+$' },
      path_concat_mode: { type: 'string', default: 'replace', enum: ['replace', 'prefix'], description: 'the concatenation mode for custom path' },
      sample_ratio: { type: 'number', minimum: 0.00001, maximum: 1, default: 1 },
    },
    required: ['host'],
  },
  rewrite(conf, ctx) {
    if (conf.sample_ratio !== 1 && !(Math.random() < conf.sample_ratio)) return;
    // gRPC mirrors need grpc_pass: not mirrored here
    if (/^grpcs?:/.test(conf.host)) return;
    ctx.state.set(chosen, mirrorUri(conf, ctx));
  },
  async beforeProxy(_conf, ctx) {
    const target = ctx.state.get(chosen) as string | undefined;
    if (target === undefined) return;
    // mirror_request_body on: the body is read whole before the request goes on
    const hasBody = ctx.header('content-length') !== undefined || ctx.header('transfer-encoding') !== undefined;
    const b = hasBody ? await ctx.requestBody() : undefined;
    send(target, ctx, Buffer.isBuffer(b) ? b : undefined);
  },
};

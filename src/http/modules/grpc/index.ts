/**
 * ngx_http_grpc_module: `grpc_pass` to a gRPC server over HTTP/2 (h2c for
 * grpc://, TLS with ALPN h2 for grpcs://) on the upstream engine. The
 * request's head is an HTTP/2 HEADERS (`:method`, `:scheme`, `:path`,
 * `:authority` — grpc_pass's host, or `grpc_set_header Host`), the client's
 * fields less the hop-by-hop ones, `te: trailers` when the client asked for
 * trailers; the body streams as DATA as the client sends it. The framing is
 * node:http2's client session (request.ts).
 */
import { Ctx } from '../../../conf/directive.ts';
import type { Directive } from '../../../conf/directive.ts';
import { listOf } from '../../../conf/setters.ts';
import { compileComplex } from '../../../core/variables.ts';
import { parseUrl } from '../../../upstream/address.ts';
import { dynamicTarget } from '../cgi-upstream/module.ts';
import { DONE, httpMainOf } from '../../http-conf.ts';
import type { HttpMainConf, HttpModule, LocationConf, PhaseHandler } from '../../http-conf.ts';
import { defaultTempPath, hasRequestBody } from '../../request-body.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { finishLevels, hiddenHeaders, upstreamDirectives, upstreamSslDirectives } from '../../upstream/directives.ts';
import { beginUpstream, upstreamAdd } from '../../upstream/module.ts';
import { peerChooserFor } from '../../upstream/peer-choice.ts';
import { resolveTarget } from '../../upstream/resolve.ts';
import type { UpstreamTarget } from '../../upstream/resolve.ts';
import { NO_BODY, outgoingBody } from '../../upstream/send-body.ts';
import type { OutgoingBody } from '../../upstream/send-body.ts';
import { tlsFor } from '../../upstream/tls.ts';
import { upstreamUri } from '../proxy/target.ts';
import type { CgiDerived } from '../cgi-upstream/conf.ts';
import { GRPC_HIDDEN, grpcLoc } from './conf.ts';
import type { GrpcLoc } from './conf.ts';
import { GrpcRequest, grpcProtocol } from './request.ts';

/** `grpc://`, `grpcs://` or none (plain). */
function splitScheme(url: string): { url: string; tls: boolean } {
  const l = url.slice(0, 8).toLowerCase();
  if (l.startsWith('grpcs://')) return { url: url.slice(8), tls: true };
  if (l.startsWith('grpc://')) return { url: url.slice(7), tls: false };
  return { url, tls: false };
}

/** Request fields never passed (nginx's grpc_set_header defaults of ""); te is made anew. */
const NOT_PASSED = new Set(['host', 'connection', 'transfer-encoding', 'keep-alive', 'expect', 'upgrade', 'te',
  'proxy-connection', 'http2-settings']);

/** The request's HTTP/2 head for the upstream. */
function requestHeaders(r: HttpRequest, c: GrpcLoc, tls: boolean, authority: string): Record<string, string | string[]> {
  const set = new Map<string, string>();
  for (const h of c.setHeaders ?? []) set.set(h.name.toLowerCase(), h.value.evaluate(r));
  const host = set.get('host');
  const out: Record<string, string | string[]> = {
    ':method': r.method, ':scheme': tls ? 'https' : 'http', ':path': upstreamUri(r, '', '', false),
    ':authority': host || authority,
  };
  if (c.passRequestHeaders) {
    const raw = r.headersIn;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toLowerCase();
      if (NOT_PASSED.has(name) || set.has(name) || name === 'content-length') continue;
      const had = out[name];
      if (had === undefined) out[name] = raw[i + 1];
      else if (Array.isArray(had)) had.push(raw[i + 1]);
      else out[name] = [had, raw[i + 1]];
    }
  }
  // nginx's $grpc_internal_trailers: "trailers" when the client's TE lists it
  const te = r.header('te');
  if (te !== undefined && /(^|,)\s*trailers\s*(,|;|$)/i.test(te) && !set.has('te')) out.te = 'trailers';
  const len = r.header('content-length');
  if (len !== undefined && !set.has('content-length') && c.passRequestBody) out['content-length'] = len;
  for (const [name, v] of set) if (name !== 'host' && v !== '') out[name] = v;
  return out;
}

const handler: PhaseHandler = async (r: HttpRequest): Promise<number> => {
  const conf = r.level.get(grpcLoc);
  const target = conf.target;
  if (!target) {
    requestLog(r).alert('no upstream configuration');
    return 500;
  }
  let where: UpstreamTarget;
  let tlsHost = target.tls ? target.host : undefined;
  let authority = target.authority ?? target.host;
  if (target.dynamic) {
    const { url, tls } = splitScheme(target.dynamic.evaluate(r));
    const got = dynamicTarget(r, url, tls);
    if (typeof got === 'number') return got;
    ({ where, tlsHost } = got);
    authority = got.u.unix ? 'localhost' : got.u.hostPort;
  } else {
    where = { group: target.group, hostHeader: '' };
  }
  let body: OutgoingBody | undefined;
  if (hasRequestBody(r)) {
    // the body streams as the client sends it (nginx's grpc: request_body_no_buffering)
    const out = await outgoingBody(r, { stream: !conf.requestBuffering, passBody: conf.passRequestBody, framing: () => undefined });
    if (typeof out === 'number') return out;
    if (out.sender !== NO_BODY) body = out;
  }
  const p = resolveTarget(r, where);
  const placed = p instanceof Promise ? await p : p;
  if (typeof placed === 'number') return placed;
  const tls = tlsHost === undefined ? undefined : tlsFor(r, conf, tlsHost);
  if (tlsHost !== undefined && !tls) return 500;
  // gRPC is HTTP/2 only: ALPN asks for h2 (nginx's ngx_ssl_set_alpn)
  if (tls) tls.options.ALPNProtocols = ['h2'];
  const u = new GrpcRequest(r, conf, conf.derived as CgiDerived, {
    protocol: grpcProtocol, head: '', sender: body ? body.sender : NO_BODY, group: placed.group,
    chooser: peerChooserFor(r, placed), tls, schema: tls ? 'grpcs://' : 'grpc://', uri: '', record: beginUpstream(r), method: r.method,
  });
  u.authority = authority;
  u.headers = requestHeaders(r, conf, !!tls, authority);
  u.start();
  return DONE;
};

/** The engine's rows nginx's grpc module has (no buffering, temp files, store, limit_rate). */
const ENGINE_ROWS = new Set(['hide_header', 'pass_header', 'ignore_headers', 'intercept_errors', 'buffer_size',
  'connect_timeout', 'read_timeout', 'send_timeout', 'next_upstream', 'next_upstream_tries', 'next_upstream_timeout',
  'socket_keepalive', 'bind', 'pass_request_headers', 'pass_request_body']);

const directives: Directive[] = [
  {
    name: 'grpc_pass', contexts: Ctx.LOCATION | Ctx.LIF, args: 1,
    handler(cf, node) {
      const c = cf.get(grpcLoc);
      if (c.ownTarget) return 'is duplicate';
      const loc = cf.data.location as LocationConf | undefined;
      if (!loc) throw cf.error('"grpc_pass" directive is not allowed here');
      if (node.args[0].includes('$')) {
        c.target = { group: undefined, dynamic: compileComplex(cf, httpMainOf(cf).variables, node.args[0]), tls: false, host: '' };
      } else {
        const { url, tls } = splitScheme(node.args[0]);
        const u = parseUrl(url, { uriPart: false });
        if (typeof u === 'string') throw cf.error(`${u} in upstream "${url}"`);
        if (u.uri) throw cf.error(`invalid host in upstream "${url}"`);
        c.target = {
          group: upstreamAdd(cf, u, false), dynamic: undefined, tls, host: u.unix ? 'localhost' : u.host,
          authority: u.unix ? 'localhost' : u.hostPort,
        };
      }
      c.ownTarget = true;
      loc.contentHandler = handler;
      if (loc.name.endsWith('/')) loc.autoRedirect = true;
    },
  },
  {
    name: 'grpc_set_header', contexts: Ctx.HTTP | Ctx.SERVER | Ctx.LOCATION, args: 2,
    handler: listOf(grpcLoc, 'setHeaders', (cf, node) => ({ name: node.args[0], value: compileComplex(cf, httpMainOf(cf).variables, node.args[1]) })),
  },
  ...upstreamDirectives('grpc_', grpcLoc).filter((d) => ENGINE_ROWS.has(d.name.slice(5))),
  ...upstreamSslDirectives('grpc_', grpcLoc),
];

function finish(http: HttpMainConf): void {
  finishLevels(http, grpcLoc, (c: GrpcLoc) => {
    // nginx's grpc merge has no buffer checks: the response is never buffered (grpc_buffer_size 65k is fine)
    const size = Math.max(c.bufferSize, c.buffers.size);
    const d: CgiDerived = {
      busyBuffersSize: 2 * size, tempFileWriteSize: 2 * size, tempPath: defaultTempPath('grpc_temp'),
      hidden: hiddenHeaders(GRPC_HIDDEN, c), headerParams: new Set(), passesServerDate: true,
    };
    c.derived = d;
    return d;
  });
}

export const grpcModule: HttpModule = {
  name: 'ngx_http_grpc_module',
  directives,
  postconfiguration: finish,
};

/**
 * The machinery fastcgi, uwsgi and scgi share (nginx repeats it in each of
 * ngx_http_{fastcgi,uwsgi,scgi}_module.c): `*_pass` (host:port, unix:,
 * an upstream name, or variables), `*_param` with `if_not_empty`, the
 * engine's directives under the module's prefix, the merge-time checks, the
 * params and `HTTP_*` headers of one request, and the content handler that
 * reads the body and starts the upstream exchange with the protocol's
 * encoding.
 */
import { Ctx } from '../../../conf/directive.ts';
import type { Directive } from '../../../conf/directive.ts';
import type { ConfContext } from '../../../conf/context.ts';
import { listOf } from '../../../conf/setters.ts';
import { compileComplex } from '../../../core/variables.ts';
import { parseUrl } from '../../../upstream/address.ts';
import { DONE, httpMainOf } from '../../http-conf.ts';
import type { HttpMainConf, LocationConf, PhaseHandler } from '../../http-conf.ts';
import { hasRequestBody, isChunked } from '../../request-body.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { deriveBuffers, finishLevels, hiddenHeaders, upstreamDirectives } from '../../upstream/directives.ts';
import { beginUpstream, findUpstream, upstreamAdd } from '../../upstream/module.ts';
import { peerChooserFor } from '../../upstream/peer-choice.ts';
import type { Placement } from '../../upstream/peer-choice.ts';
import type { UpstreamProtocol } from '../../upstream/protocol.ts';
import { resolveTarget } from '../../upstream/resolve.ts';
import type { UpstreamTarget } from '../../upstream/resolve.ts';
import { NO_BODY, outgoingBody } from '../../upstream/send-body.ts';
import type { BodyFraming, OutgoingBody } from '../../upstream/send-body.ts';
import { UpstreamRequest } from '../../upstream/upstream-request.ts';
import { tlsFor } from '../../upstream/tls.ts';
import { upstreamCache } from '../upstream-cache/cache.ts';
import { httpHeadOf } from '../upstream-cache/protocol.ts';
import type { CacheProtocol } from '../upstream-cache/protocol.ts';
import { cacheDirectives, checkCacheKeys } from '../upstream-cache/directives.ts';
import type { CacheSlot } from '../upstream-cache/directives.ts';
import { CGI_HIDDEN } from './conf.ts';
import type { CgiDerived, CgiLoc, CgiLocConf, CgiSlot } from './conf.ts';

/** What one CGI-family module gives the shared machinery. */
export interface CgiModuleSpec<C extends CgiLocConf> {
  /** `fastcgi_`, `uwsgi_`, `scgi_`. */
  prefix: string;
  /** For log lines: `fastcgi://`. */
  schema: string;
  /** Upstream fields not passed to the client by default (CGI_HIDDEN when unset; uwsgi passes Status on). */
  hidden?: readonly string[];
  /** Schemes `*_pass` may start with (`uwsgi://`, `suwsgi://`), dropped before the address is read; true: over TLS. */
  urlSchemes?: Record<string, boolean>;
  /** For log lines of a TLS target: `suwsgi://`. */
  tlsSchema?: string;
  slot: CgiSlot<C>;
  /** The module's `*_cache` settings (cacheSlot(prefix)); none for memcached, which nginx does not cache. */
  cache?: CacheSlot;
  protocol: UpstreamProtocol<CgiLoc<C>, CgiDerived>;
  /**
   * The request head from the params (flat name, value list) and the body
   * that follows (undefined: none); a status when it cannot be built.
   */
  head(r: HttpRequest, conf: CgiLoc<C>, params: string[], body: OutgoingBody | undefined): string | number;
  /** How the body is framed on the wire (FastCGI's STDIN records); undefined: as is. */
  framing?: BodyFraming;
  /** A body of unknown length (chunked) can be streamed: the protocol does not announce the length first. */
  streamsChunked: boolean;
}

/** The address part of a `*_pass` URL, and whether its scheme asks for TLS. */
function splitScheme(spec: { urlSchemes?: Record<string, boolean> }, url: string): { url: string; tls: boolean } {
  for (const [scheme, tls] of Object.entries(spec.urlSchemes ?? {})) {
    if (url.slice(0, scheme.length).toLowerCase() === scheme) return { url: url.slice(scheme.length), tls };
  }
  return { url, tls: false };
}

/** `*_pass`, `*_param` and the engine's directives, for a module's prefix and slot; `handler` is its content handler. */
export function cgiDirectives<C extends CgiLocConf>(spec: CgiModuleSpec<C>, handler: PhaseHandler): Directive[] {
  const { prefix, slot } = spec;
  return [
    {
      name: prefix + 'pass', contexts: Ctx.LOCATION | Ctx.LIF, args: 1,
      handler(cf, node) {
        const c = cf.get(slot);
        if (c.ownTarget) return 'is duplicate';
        const loc = cf.data.location as LocationConf | undefined;
        if (!loc) throw cf.error(`"${prefix}pass" directive is not allowed here`);
        if (node.args[0].includes('$')) {
          c.target = { group: undefined, dynamic: compileComplex(cf, httpMainOf(cf).variables, node.args[0]), tls: false, host: '' };
        } else {
          const { url, tls } = splitScheme(spec, node.args[0]);
          const u = parseUrl(url, { uriPart: false });
          if (typeof u === 'string') throw cf.error(`${u} in upstream "${url}"`);
          c.target = { group: upstreamAdd(cf, u, false), dynamic: undefined, tls, host: u.unix ? 'localhost' : u.host };
        }
        c.ownTarget = true;
        c.defaultTempPath = cf.prefixPath(prefix + 'temp');
        loc.contentHandler = handler;
        if (loc.name.endsWith('/')) loc.autoRedirect = true;
      },
    },
    {
      name: prefix + 'param', contexts: Ctx.HTTP | Ctx.SERVER | Ctx.LOCATION, args: [2, 3],
      handler: listOf(slot as CgiSlot<CgiLocConf>, 'params', (cf, node) => {
        const a = node.args;
        if (a.length === 3 && a[2] !== 'if_not_empty') throw cf.error(`invalid parameter "${a[2]}"`);
        return { name: a[0], value: compileComplex(cf, httpMainOf(cf).variables, a[1]), ifNotEmpty: a.length === 3 };
      }),
    },
    ...upstreamDirectives(prefix, slot),
    ...(spec.cache ? cacheDirectives(prefix, spec.cache) : []),
  ];
}

/**
 * The cache around a CGI-family exchange: without `*_cache_key` every
 * request has the empty key (nginx warns, checkCacheKeys), the head is
 * stored as HTTP, and no revalidation (the params are sent as built; see
 * requestParams for the conditional fields a caching level leaves out).
 */
const cgiCacheProtocol: CacheProtocol = { storedHead: httpHeadOf, defaultKey: () => '' };

const withCache = new WeakMap<object, UpstreamProtocol<CgiLoc, CgiDerived>>();

/** The module's protocol with its cache hooks (made once per module). */
function protocolOf<C extends CgiLocConf>(spec: CgiModuleSpec<C>): UpstreamProtocol<CgiLoc<C>, CgiDerived> {
  if (!spec.cache) return spec.protocol;
  let p = withCache.get(spec);
  if (!p) {
    p = { ...(spec.protocol as UpstreamProtocol<CgiLoc, CgiDerived>), cache: upstreamCache(spec.cache, cgiCacheProtocol) };
    withCache.set(spec, p);
  }
  return p as UpstreamProtocol<CgiLoc<C>, CgiDerived>;
}

/** Request headers a caching level does not pass as params unless a param sets them (ngx_http_fastcgi_cache_headers and its twins). */
const CACHE_CLEARED = new Set(['HTTP_IF_MODIFIED_SINCE', 'HTTP_IF_UNMODIFIED_SINCE', 'HTTP_IF_NONE_MATCH', 'HTTP_IF_MATCH', 'HTTP_RANGE', 'HTTP_IF_RANGE']);

/** The module's postconfiguration: every level's derived values, with nginx's merge-time checks. */
export function finishCgi<C extends CgiLocConf>(spec: CgiModuleSpec<C>, http: HttpMainConf, cf: ConfContext): void {
  finishLevels(http, spec.slot as CgiSlot<CgiLocConf>, (c: CgiLoc, _parent, where) => {
    const headerParams = new Set<string>();
    for (const p of c.params ?? []) if (p.name.startsWith('HTTP_')) headerParams.add(p.name);
    const d: CgiDerived = {
      ...deriveBuffers(spec.prefix, c, c.defaultTempPath, spec.prefix + 'temp', where),
      hidden: hiddenHeaders(spec.hidden ?? CGI_HIDDEN, c), headerParams, passesServerDate: true,
    };
    c.derived = d;
    return d;
  });
  if (spec.cache) checkCacheKeys(http, cf, spec.prefix, spec.cache);
}

/**
 * The params of one request as a flat name, value list: the configured
 * ones (an `if_not_empty` one only with a value), then each request header
 * as `HTTP_NAME` unless a param set that name. Repeated headers go as one
 * param, their values joined with ", " ("; " for Cookie), as nginx 1.23+.
 */
export function requestParams(r: HttpRequest, c: CgiLoc, d: CgiDerived, caching = false): string[] {
  const out: string[] = [];
  for (const p of c.params ?? []) {
    const v = p.value.evaluate(r);
    if (p.ifNotEmpty && v === '') continue;
    out.push(p.name, v);
  }
  if (!c.passRequestHeaders) return out;
  const raw = r.headersIn;
  const seen = new Map<string, number>();
  for (let i = 0; i < raw.length; i += 2) {
    let name = 'HTTP_';
    const key = raw[i];
    for (let k = 0; k < key.length; k++) {
      const ch = key[k];
      name += ch === '-' ? '_' : ch.toUpperCase();
    }
    if (d.headerParams.has(name) || (caching && CACHE_CLEARED.has(name))) continue;
    const at = seen.get(name);
    if (at !== undefined) {
      out[at] += (name === 'HTTP_COOKIE' ? '; ' : ', ') + raw[i + 1];
      continue;
    }
    seen.set(name, out.length + 1);
    out.push(name, raw[i + 1]);
  }
  return out;
}

/**
 * Where a `*_pass` with variables goes, from its evaluated URL (scheme
 * taken off): the address, the TLS name, the URL read; or the status when
 * it cannot be used (nginx's 500 for a bad URL, 502 for a name without a
 * port that no upstream{} has).
 */
export function dynamicTarget(r: HttpRequest, url: string, tls: boolean):
  { where: UpstreamTarget; tlsHost: string | undefined; u: Exclude<ReturnType<typeof parseUrl>, string> } | number {
  const u = parseUrl(url, { uriPart: false });
  if (typeof u === 'string') {
    requestLog(r).error(`${u} in upstream "${url}"`);
    return 500;
  }
  if (!u.unix && u.port === undefined && !findUpstream(r.main, u.host, undefined)) {
    requestLog(r).error(`no port in upstream "${u.host}"`);
    return 502;
  }
  const where = { connectHost: u.host, connectPort: u.port, noPort: u.port === undefined, unix: u.unix, hostHeader: u.hostPort };
  return { where, tlsHost: tls ? (u.unix ? 'localhost' : u.host) : undefined, u };
}

/** The content handler `*_pass` installs: body, target, head, then the exchange. */
export function cgiHandler<C extends CgiLocConf>(spec: CgiModuleSpec<C>): PhaseHandler {
  return async (r: HttpRequest): Promise<number> => {
    const conf = r.level.get(spec.slot) as CgiLoc<C>;
    const target = conf.target;
    if (!target) {
      requestLog(r).alert('no upstream configuration');
      return 500;
    }
    let where: UpstreamTarget;
    let tlsHost = target.tls ? target.host : undefined;
    if (target.dynamic) {
      const { url, tls } = splitScheme(spec, target.dynamic.evaluate(r));
      const got = dynamicTarget(r, url, tls);
      if (typeof got === 'number') return got;
      ({ where, tlsHost } = got);
    } else {
      where = { group: target.group, hostHeader: '' };
    }
    let body: OutgoingBody | undefined;
    if (hasRequestBody(r)) {
      const chunked = isChunked(r);
      const framing = spec.framing;
      const out = await outgoingBody(r, {
        stream: !conf.requestBuffering && (!chunked || spec.streamsChunked), passBody: conf.passRequestBody,
        framing: () => framing,
      });
      if (typeof out === 'number') return out;
      if (out.sender !== NO_BODY) body = out;
    }
    const d = conf.derived!;
    const head = spec.head(r, conf, requestParams(r, conf, d, !!spec.cache && !!r.level.get(spec.cache).zone), body);
    if (typeof head === 'number') return head;
    const p = resolveTarget(r, where);
    const placed = p instanceof Promise ? await p : p;
    if (typeof placed === 'number') return placed;
    return start(spec, r, conf, d, head, body, placed, tlsHost);
  };
}

function start<C extends CgiLocConf>(spec: CgiModuleSpec<C>, r: HttpRequest, conf: CgiLoc<C>, d: CgiDerived, head: string,
  body: OutgoingBody | undefined, where: Placement, tlsHost: string | undefined): number {
  const tls = tlsHost === undefined ? undefined : tlsFor(r, conf, tlsHost);
  // a client certificate that cannot be loaded (logged): nginx's 500
  if (tlsHost !== undefined && !tls) return 500;
  const u = new UpstreamRequest(r, conf, d, {
    protocol: protocolOf(spec), head, sender: body ? body.sender : NO_BODY, group: where.group, chooser: peerChooserFor(r, where),
    tls, schema: tls ? spec.tlsSchema ?? spec.schema : spec.schema, uri: '', record: beginUpstream(r),
    // the backend's answer to HEAD has the body it sends (the script decides): read into the cache when stored, else dropped (nginx's r->header_only)
    method: '',
  });
  u.start();
  return DONE;
}

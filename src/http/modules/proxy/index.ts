/**
 * ngx_http_proxy_module: `proxy_pass` and friends. The content handler reads
 * the client's body as configured, works out the target and the request
 * head from the location's compiled plan, and starts the upstream exchange
 * (upstream-request.ts); the variables `$proxy_host`, `$proxy_port` and
 * `$proxy_add_x_forwarded_for` live here too.
 */
import { DONE } from '../../http-conf.ts';
import type { HttpMainConf, HttpModule, HttpVariable, LocationConf } from '../../http-conf.ts';
import { hasRequestBody, isChunked, noBodyToRead, readRequestBody, requestBodyOf, requestBodyVariables, setTempPrefix } from '../../request-body.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import type { VariableDef } from '../../../core/variables.ts';
import { beginUpstream } from '../../upstream/module.ts';
import { deriveBuffers, finishLevels, hiddenHeaders } from '../../upstream/directives.ts';
import { peerChooserFor } from '../../upstream/peer-choice.ts';
import type { Placement } from '../../upstream/peer-choice.ts';
import { proxyLoc } from './conf.ts';
import type { DerivedConf, ProxyLoc } from './conf.ts';
import { cacheDirectives } from './cache.ts';
import { cacheStatus } from '../upstream-cache/cache.ts';
import { cookieDirectives } from './cookies.ts';
import { proxyDirectives, setProxyContentHandler } from './directives.ts';
import { defaultRule } from './redirect.ts';
import type { RedirectRule } from './redirect.ts';
import { buildHead, compileHeaderPlan } from './request-head.ts';
import type { HeaderPlan } from './request-head.ts';
import { CHUNKED_FRAMING, FileSender, MemorySender, NO_BODY, outgoingBody, requestBuffering } from '../../upstream/send-body.ts';
import type { BodySender } from '../../upstream/send-body.ts';
import { resolveTarget } from '../../upstream/resolve.ts';
import type { ResolvedTarget } from './target.ts';
import { evalTarget, upstreamUri } from './target.ts';
import { tlsFor } from '../../upstream/tls.ts';
import { UpstreamRequest } from '../../upstream/upstream-request.ts';
import { proxyProtocol } from './protocol.ts';

/** The per-request proxy state, for `$proxy_host` and `$proxy_port`. */
const PROXY_CTX = {};

const HIDDEN_BY_DEFAULT = ['date', 'server', 'x-pad', 'x-accel-expires', 'x-accel-redirect', 'x-accel-limit-rate', 'x-accel-buffering', 'x-accel-charset'];

const plans = new WeakMap<object, HeaderPlan>();
const defaultPlans = new WeakMap<HttpMainConf, HeaderPlan>();

/** Computes a location's derived values once (nginx does this in merge_loc_conf). */
function finishConf(main: HttpMainConf, c: ProxyLoc, parent: DerivedConf | undefined, where: { file: string; line: number } | undefined): DerivedConf {
  const buffers = deriveBuffers('proxy_', c, c.defaultTempPath, 'proxy_temp', where);
  let plan: HeaderPlan | undefined;
  if (c.setHeaders) {
    plan = plans.get(c.setHeaders);
    if (!plan) plans.set(c.setHeaders, (plan = compileHeaderPlan(main.variables, c.setHeaders)));
  } else {
    plan = defaultPlans.get(main);
    if (!plan) defaultPlans.set(main, (plan = compileHeaderPlan(main.variables, undefined)));
  }
  const hidden = hiddenHeaders(HIDDEN_BY_DEFAULT, c);
  let redirects: RedirectRule[] | undefined;
  if (c.redirect === false) redirects = undefined;
  else if (c.redirect) redirects = c.redirect.map((rule) => (rule.isDefault && c.target ? defaultRule(c.target) : rule));
  else if (parent && parent.redirects) redirects = parent.redirects;
  else if (c.ownTarget && c.target && !c.target.dynamic) redirects = [defaultRule(c.target)];
  const d: DerivedConf = {
    ...buffers,
    headerPlan: plan, hidden, redirects,
    cookies: c.cookieDomains || c.cookiePaths || c.cookieFlags ? c : undefined,
  };
  c.derived = d;
  return d;
}

/** Finishes every location of the http block, parents before children. */
function finishAll(http: HttpMainConf): void {
  finishLevels(http, proxyLoc, (c: ProxyLoc, parent: DerivedConf | undefined, where) => finishConf(http, c, parent, where));
}

/**
 * proxy_pass's content handler. A request without a body to read goes out
 * synchronously; reading a body or resolving a name makes it asynchronous.
 * Once started, the exchange answers the client itself: it finalizes the
 * request with an error status, or streams the response.
 */
function proxyHandler(r: HttpRequest): number | Promise<number> {
  const conf = r.level.get(proxyLoc);
  const target = conf.target;
  if (!target) {
    // reached from an `if` block without proxy_pass after one with it (proxy_if.t): nginx's 500
    requestLog(r).alert('no upstream configuration');
    return 500;
  }
  const d = conf.derived ?? finishConf(r.main, conf, undefined, undefined);
  let rt: ResolvedTarget = target;
  if (target.dynamic) {
    const resolved = evalTarget(target, r);
    if (typeof resolved === 'string') {
      requestLog(r).error(resolved);
      return 500;
    }
    rt = resolved;
  }
  // $proxy_host and $proxy_port exist from here on, as nginx's proxy ctx (a request denied before is logged with "-")
  r.ctx.set(PROXY_CTX, rt);
  if (conf.setBody || hasRequestBody(r)) return withBody(r, conf, d, rt);
  noBodyToRead(r);
  return place(r, conf, d, rt, NO_BODY, r.head.contentLength, false);
}

/** The handler's path for requests with a body (or proxy_set_body). */
async function withBody(r: HttpRequest, conf: ProxyLoc, d: DerivedConf, rt: ResolvedTarget): Promise<number> {
  if (conf.setBody) {
    if (hasRequestBody(r)) {
      const rb = await readRequestBody(r);
      if (typeof rb === 'number') return rb;
    }
    const body = Buffer.from(conf.setBody.evaluate(r), 'latin1');
    return place(r, conf, d, rt, new MemorySender([body]), body.length, false);
  }
  const http11 = conf.httpVersion === '1.1';
  const out = await outgoingBody(r, {
    // a chunked body is streamed only to an HTTP/1.1 upstream, re-chunked
    stream: !requestBuffering(r, conf.requestBuffering) && (!isChunked(r) || http11), passBody: conf.passRequestBody,
    framing: (chunkedIn) => (chunkedIn ? CHUNKED_FRAMING : undefined),
  });
  if (typeof out === 'number') return out;
  return place(r, conf, d, rt, out.sender, out.length, out.chunked);
}

/** Finds where the request goes (resolving a name when it must), then starts the exchange. */
function place(r: HttpRequest, conf: ProxyLoc, d: DerivedConf, rt: ResolvedTarget, sender: BodySender,
  bodyLength: number, chunkedOut: boolean): number | Promise<number> {
  const p = resolveTarget(r, rt);
  if (typeof p === 'number') return p;
  if (p instanceof Promise) {
    return p.then((q) => (typeof q === 'number' ? q : start(r, conf, d, rt, sender, bodyLength, chunkedOut, q)));
  }
  return start(r, conf, d, rt, sender, bodyLength, chunkedOut, p);
}

function start(r: HttpRequest, conf: ProxyLoc, d: DerivedConf, rt: ResolvedTarget, sender: BodySender,
  bodyLength: number, chunkedOut: boolean, where: Placement): number {
  const target = conf.target!;
  const method = conf.method ? conf.method.evaluate(r) : r.method;
  const uri = upstreamUri(r, rt.uri, target.location, target.dynamic !== undefined);
  if (uri === '') {
    requestLog(r).error('zero length URI to proxy');
    return 500;
  }
  const headWith = (length: number, chunked: boolean) => buildHead(r, d.headerPlan, {
    method, uri, http11: conf.httpVersion === '1.1', hostHeader: rt.hostHeader, bodyLength: length, chunked,
    passRequestHeaders: conf.passRequestHeaders,
  });
  const head = headWith(bodyLength, chunkedOut);
  const tls = rt.https ? tlsFor(r, conf, rt.host) : undefined;
  // a client certificate that cannot be loaded (logged): nginx's 500
  if (rt.https && !tls) return 500;
  const u = new UpstreamRequest(r, conf, d, {
    protocol: proxyProtocol, head, sender, group: where.group, chooser: peerChooserFor(r, where),
    tls,
    schema: rt.schema, uri, record: beginUpstream(r), method,
    // the body as read now (a Lua balancer's ngx.req.set_body_data); a streamed or proxy_set_body one stays
    recreate: () => {
      const rb = requestBodyOf(r);
      if (!rb || conf.setBody || !conf.passRequestBody) return { head: headWith(bodyLength, chunkedOut), sender };
      sender = rb.file !== undefined ? new FileSender(rb) : new MemorySender(rb.bufs);
      return { head: headWith(rb.length, false), sender };
    },
  });
  u.start();
  return DONE;
}

setProxyContentHandler(proxyHandler);

function proxyVars(r: HttpRequest): ResolvedTarget | undefined {
  return r.ctx.get(PROXY_CTX) as ResolvedTarget | undefined;
}

const variables: HttpVariable[] = [
  { name: 'proxy_host', noCache: true, get: (r) => proxyVars(r)?.hostHeader },
  { name: 'proxy_port', noCache: true, get: (r) => proxyVars(r)?.port },
  {
    name: 'proxy_add_x_forwarded_for', noCache: true,
    get(r) {
      const raw = r.headersIn;
      let xff: string | undefined;
      for (let i = 0; i < raw.length; i += 2) {
        if (raw[i].length === 15 && raw[i].toLowerCase() === 'x-forwarded-for') xff = xff === undefined ? raw[i + 1] : `${xff}, ${raw[i + 1]}`;
      }
      return xff === undefined ? r.remoteAddress : `${xff}, ${r.remoteAddress}`;
    },
  },
  // proxy_cache (cache.ts): MISS, HIT, EXPIRED, BYPASS, STALE, UPDATING, REVALIDATED
  { name: 'upstream_cache_status', noCache: true, get: cacheStatus },
  ...requestBodyVariables,
];

export const proxyModule: HttpModule = {
  name: 'ngx_http_proxy_module',
  directives: [...proxyDirectives, ...cookieDirectives, ...cacheDirectives],
  variables,
  postconfiguration: finishAll,
  initWorker(cycle) {
    setTempPrefix(cycle.paths.prefix);
  },
};

/**
 * The gateway's data plane in one worker, as apisix/init.lua's
 * http_access_phase / header_filter / body_filter run it: match the
 * request against the router of the configuration version the worker
 * holds (rebuilt when the follower applied a change), run the global
 * rules' then the route's rewrite and access functions (the consumer's
 * plugins merged in after authentication, their rewrite run then), and set
 * where proxy_pass goes: the upstream's nodes through the per-try peer
 * seam, its timeouts, scheme, Host (pass_host) and the URI and method
 * plugins chose. A request keeps the version it started with.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { HttpRequest } from '../../http/request.ts';
import { sendSimple } from '../../http/response.ts';
import { useUpstreamTimeouts, usePeerChooser } from '../../http/upstream/peer-choice.ts';
import type { UpstreamTimeouts } from '../../http/upstream/peer-choice.ts';
import type { Keyring } from '../data-encryption.ts';
import type { BodyChunk, PhaseResult, PluginAnswer, PluginContext } from '../plugins/phase-api.ts';
import type { PluginRegistry } from '../plugins/registry.ts';
import { readConfig } from '../router/config-view.ts';
import type { ConfigView, Consumer, Plugins } from '../router/config-view.ts';
import { HttpRouter } from '../router/router.ts';
import type { MatchedRoute } from '../router/router.ts';
import type { ConfigFollower } from '../store/follower.ts';
import { afterResponse, balancerFor, chooserFor } from './balancer.ts';
import { pruneCheckers } from './health.ts';
import { chainOf, withErrorResponse } from './plugin-chain.ts';
import type { ChainLink } from './plugin-chain.ts';
import { forwardedHeaders, RequestContext, routeKeyOf } from './request-context.ts';
import type { LocalConf } from './request-context.ts';
import { luaNow, luaReady } from '../plugins/serverless.ts';

/** Answers and continuations of the access handler (the engine's DECLINED / DONE are passed in). */
export interface PhaseCodes { declined: number; done: number }

/** What a request carries from the access phase to the filters. */
export interface GatewayRequestState {
  ctx: RequestContext;
  /** Chains whose header filters run: global rules', then the route's. */
  chains: ChainLink[][];
  /** The links whose body filters run for this response, by priority. */
  bodyFilters?: ChainLink[];
}

interface Version {
  view: ConfigView;
  router: HttpRouter;
  /** `plugin\0field\0value` → the consumer (and credential) holding it. */
  consumerKeys: Map<string, { consumer: Consumer; credentialId: string | undefined }>;
}

function indexConsumers(view: ConfigView): Version['consumerKeys'] {
  const m: Version['consumerKeys'] = new Map();
  for (const consumer of view.consumers.values()) {
    for (const cred of consumer.credentials) {
      for (const [plugin, conf] of Object.entries(cred.plugins)) {
        for (const [field, value] of Object.entries(conf ?? {})) {
          if (typeof value === 'string') m.set(`${plugin}\0${field}\0${value}`, { consumer, credentialId: cred.id });
        }
      }
    }
  }
  return m;
}

interface MergedChain { chain: ChainLink[]; added: ChainLink[] }
const mergedChains = new WeakMap<Plugins, WeakMap<Plugins, MergedChain>>();

export class DataPlane {
  private version: Version | undefined;
  private readonly follower: ConfigFollower;
  private readonly prefix: string;
  private readonly registry: PluginRegistry;
  private readonly keyring: Keyring | undefined;
  private readonly mode: 'radixtree_host_uri' | 'radixtree_uri';
  readonly serverHeader: string;
  /** apisix.show_upstream_status_in_response_header. */
  private readonly showUpstreamStatus: boolean;
  private readonly localConf: LocalConf;

  constructor(opts: {
    follower: ConfigFollower; prefix: string; registry: PluginRegistry; keyring: Keyring | undefined;
    mode: 'radixtree_host_uri' | 'radixtree_uri'; serverHeader: string; showUpstreamStatus?: boolean; localConf?: LocalConf;
  }) {
    this.localConf = opts.localConf ?? { pluginAttr: {}, sslPorts: [] };
    this.showUpstreamStatus = opts.showUpstreamStatus ?? false;
    this.follower = opts.follower;
    this.prefix = opts.prefix;
    this.registry = opts.registry;
    this.keyring = opts.keyring;
    this.mode = opts.mode;
    this.serverHeader = opts.serverHeader;
  }

  /** The configuration version to route with: rebuilt when the follower's revision moved. */
  current(): Version {
    const rev = this.follower.revision;
    if (this.version && this.version.view.revision === rev) return this.version;
    const view = readConfig(this.follower.kvs.values(), this.prefix, rev, this.registry, this.keyring);
    this.version = { view, router: new HttpRouter(view, this.mode), consumerKeys: indexConsumers(view) };
    pruneCheckers(view);
    return this.version;
  }

  /** The access phase; `codes` are the engine's DECLINED and DONE. */
  access(r: HttpRequest, codes: PhaseCodes, keep: (r: HttpRequest, s: GatewayRequestState) => void, waited = false): number | Promise<number> {
    const v = this.current();
    if (v.router.needsLua && !waited && !luaNow()) return luaReady().then(() => this.access(r, codes, keep, true));
    const rawHost = r.header('host') ?? '';
    // APISIX's ctx.var: `http_user-id` is the header's variable `http_user_id`
    const read = (name: string): string | undefined =>
      r.main.variables.valueByName(r, name.startsWith('http_') && name.includes('-') ? name.toLowerCase().replace(/-/g, '_') : name);
    const hit = v.router.match({ path: r.uri, method: r.method, host: r.host, rawHost, remoteAddr: r.remoteAddress, read, request: r });
    const ctx = new RequestContext(r, hit, v.consumerKeys, v.view.consumers, read);
    ctx.upstreams = v.view.upstreams;
    ctx.metadata = v.view.pluginMetadata;
    ctx.localConf = this.localConf;
    forwardedHeaders(ctx, rawHost);
    const state: GatewayRequestState = { ctx, chains: [] };
    keep(r, state);
    const globals = v.view.globalRules.map((g) => chainOf(this.registry, g.plugins));
    state.chains.push(...globals);
    return this.globalsFrom(0, globals, globalRuleKeys(v.view.globalRules), r, hit?.route, state, codes);
  }

  /** Global rules from the `i`th: rewrite then access of each (a function that waits makes the rest wait). */
  private globalsFrom(i: number, globals: ChainLink[][], keys: string[], r: HttpRequest, route: MatchedRoute | undefined, state: GatewayRequestState, codes: PhaseCodes): number | Promise<number> {
    const ctx = state.ctx;
    for (; i < globals.length; i++) {
      const chain = globals[i];
      // a global rule's limiters count for the rule, over all routes (APISIX keys them by the conf's resource)
      ctx.routeKey = keys[i];
      const a = then(runPhase(chain, 'rewrite', ctx), (x) => x ?? runPhase(chain, 'access', ctx));
      if (a instanceof Promise) {
        const next = i + 1;
        return a.then((x) => (x ? answer(r, ctx, x, codes) : this.globalsFrom(next, globals, keys, r, route, state, codes)));
      }
      if (a) return answer(r, ctx, a, codes);
    }
    ctx.routeKey = routeKeyOf(route);
    if (!route) return answer(r, ctx, { status: 404, body: { error_msg: '404 Route Not Found' } }, codes);
    const chain = chainOf(this.registry, route.plugins);
    state.chains.push(chain);
    return after(runPhase(chain, 'rewrite', ctx), r, ctx, codes, () => this.routeAccess(r, route, chain, state, codes));
  }

  /** After the route's rewrite: the consumer's plugins merged in, access, before_proxy, then the upstream. */
  private routeAccess(r: HttpRequest, route: MatchedRoute, routeChain: ChainLink[], state: GatewayRequestState, codes: PhaseCodes): number | Promise<number> {
    const ctx = state.ctx;
    let chain = routeChain;
    let added: PhaseResult | Promise<PhaseResult>;
    const consumer = ctx.consumer;
    // a consumer in a group that does not exist (apisix/init.lua: failed to fetch consumer group config)
    if (consumer?.withGroup === null) return answer(r, ctx, { status: 503 }, codes);
    const consumerPlugins = consumer && (consumer.withGroup ?? consumer.plugins);
    if (consumerPlugins && Object.keys(consumerPlugins).length > 0) {
      // the consumer's plugins (over its group's) win over the route's; those it adds run their rewrite now
      const merged = this.consumerChain(route.plugins, consumerPlugins);
      chain = merged.chain;
      state.chains[state.chains.length - 1] = chain;
      if (merged.added.length > 0) added = runPhase(merged.added, 'rewrite', ctx);
    }
    return after(added, r, ctx, codes, () => after(runPhase(chain, 'access', ctx), r, ctx, codes, () => {
      const proxy = () => this.toUpstream(r, withChoice(route, ctx), ctx, codes);
      const ready = () => (ctx.delayMs > 0 ? sleep(ctx.delayMs).then(proxy) : proxy());
      return after(runPhase(chain, 'beforeProxy', ctx), r, ctx, codes, ready);
    }));
  }

  /**
   * The route's chain with the consumer's plugins merged in, and the links
   * the consumer added (not in the route's chain), built once per pair of
   * configurations.
   */
  private consumerChain(routePlugins: Plugins, consumerPlugins: Plugins): MergedChain {
    let byConsumer = mergedChains.get(routePlugins);
    if (!byConsumer) mergedChains.set(routePlugins, (byConsumer = new WeakMap()));
    let merged = byConsumer.get(consumerPlugins);
    if (!merged) {
      const chain = chainOf(this.registry, { ...routePlugins, ...withoutAuth(consumerPlugins, this.registry) });
      const before = new Set(chainOf(this.registry, routePlugins).map((l) => l.plugin.name));
      merged = { chain, added: chain.filter((l) => !before.has(l.plugin.name)) };
      byConsumer.set(consumerPlugins, merged);
    }
    return merged;
  }

  /** Sets where proxy_pass goes: nodes, timeouts, scheme, Host, URI, method. */
  private toUpstream(r: HttpRequest, route: MatchedRoute, ctx: RequestContext, codes: PhaseCodes): number | Promise<number> {
    if (route.missing === 'service') return 404;
    if (route.missing === 'upstream_id') return 502;
    if (route.missing === 'none') return 503;
    const u = route.upstream!;
    const b = balancerFor(u, route.upstreamKey, this.version?.view);
    if (b.nodes.length === 0) return 503;
    const resolving = b.resolveNames();
    if (resolving) return resolving.then(() => this.toUpstream(r, route, ctx, codes));
    const chooser = chooserFor(r, b, hashKey(u, ctx));
    const first = chooser.firstNode();
    if (!first) return 502;
    usePeerChooser(r, () => chooser);
    const t = route.conf.timeout ?? u.timeout;
    const timeouts: UpstreamTimeouts = {};
    if (t) Object.assign(timeouts, { connectTimeout: t.connect * 1000, sendTimeout: t.send * 1000, readTimeout: t.read * 1000 });
    // retry_timeout bounds the tries as proxy_next_upstream_timeout does (0: no bound)
    if (u.retry_timeout) timeouts.nextUpstreamTimeout = u.retry_timeout * 1000;
    if (t || u.retry_timeout) useUpstreamTimeouts(r, timeouts);
    const scheme = u.scheme === 'https' ? 'https' : 'http';
    // pass_host node/rewrite win over a plugin's host (apisix/init.lua set_upstream_host runs after the plugins)
    let host: string | undefined;
    if (u.pass_host === 'rewrite') host = u.upstream_host;
    else if (u.pass_host === 'node') host = first.port === (scheme === 'https' ? 443 : 80) ? first.host : first.name;
    else host = ctx.upstreamHost ?? r.header('host') ?? r.host;
    ctx.upstreamScheme = scheme;
    ctx.upstreamHost = host;
    chooser.verifyName = host;
    if (route.enableWebsocket && r.header('upgrade') !== undefined) ctx.websocket = true;
    return codes.declined;
  }

  /** Header filter: Server as APISIX's, the pending response headers, the plugins' header_filter. */
  headerFilter(r: HttpRequest, s: GatewayRequestState): void {
    r.setHeader('Server', this.serverHeader);
    r.ownServer = true;
    const ctx = s.ctx;
    ctx.status = r.status;
    ctx.flushResponseHeaders();
    const upstreamStatus = r.main.variables.valueByName(r, 'upstream_status');
    // apisix/init.lua set_resp_upstream_status: every answer's with show_upstream_status_in_response_header,
    // else when the last try's status is a 5xx, all of them ("502, 502")
    if (upstreamStatus && (this.showUpstreamStatus || lastIs5xx(upstreamStatus))) r.setHeader('X-APISIX-Upstream-Status', upstreamStatus);
    for (const chain of s.chains) {
      for (const l of chain) {
        if (!l.plugin.headerFilter || !runs(l, ctx)) continue;
        try {
          l.plugin.headerFilter(l.conf, ctx);
        } catch { /* the head is on its way: a failing plugin leaves it as it is */ }
      }
    }
    r.status = ctx.status;
  }

  /** The log phase: the plugins' log functions (limit-conn's leaving). */
  log(s: GatewayRequestState): void {
    // the balancer's part first: passive health report, ewma sample
    afterResponse(s.ctx.r, s.ctx.r.status, s.ctx.variable);
    for (const chain of s.chains) {
      for (const l of chain) {
        if (!l.plugin.log || !runs(l, s.ctx)) continue;
        try {
          l.plugin.log(l.conf, s.ctx);
        } catch { /* the answer is gone: nothing to tell */ }
      }
    }
  }

  /** Whether plugins filter this response's body (decided after the header filters; the length then goes). */
  filtersBody(s: GatewayRequestState): boolean {
    let any = false;
    s.bodyFilters = undefined;
    for (const chain of s.chains) {
      for (const l of chain) {
        if (!l.plugin.bodyFilter || !runs(l, s.ctx) || (l.plugin.filtersBody && !l.plugin.filtersBody(l.conf, s.ctx))) continue;
        (s.bodyFilters ??= []).push(l);
        any = true;
      }
    }
    return any;
  }

  /** A piece of the body through the plugins' body filters, in priority order. */
  filterBody(s: GatewayRequestState, piece: BodyChunk): BodyChunk {
    for (const l of s.bodyFilters ?? []) {
      try {
        piece = l.plugin.bodyFilter!(l.conf, s.ctx, piece) ?? piece;
      } catch { /* the body is on its way: a failing filter passes it on as it is */ }
    }
    return piece;
  }

  /** The body a plugin replaces the response's with (response-rewrite), decided in the header filter. */
  replacementBody(s: GatewayRequestState): Buffer | undefined {
    for (const chain of s.chains) {
      for (const l of chain) {
        if (!runs(l, s.ctx)) continue;
        const b = l.plugin.replaceBody?.(l.conf, s.ctx);
        if (b !== undefined) return b;
      }
    }
    return undefined;
  }
}

/** Each global rule's key for its plugins' state (`global_rule#id`), made once per configuration version. */
const ruleKeys = new WeakMap<ReadonlyArray<{ id: string | number }>, string[]>();

function globalRuleKeys(rules: ReadonlyArray<{ id: string | number }>): string[] {
  let keys = ruleKeys.get(rules);
  if (keys === undefined) ruleKeys.set(rules, (keys = rules.map((g) => `global_rule#${g.id}`)));
  return keys;
}

/** Whether the last status of `$upstream_status` ("200", "502, 502", "502 : 504") is a 5xx (trailing blanks and colons aside). */
function lastIs5xx(v: string): boolean {
  let end = v.length;
  while (end > 0 && (v[end - 1] === ':' || v.charCodeAt(end - 1) <= 32)) end--;
  if (end < 3 || v[end - 3] !== '5') return false;
  const d1 = v.charCodeAt(end - 2);
  const d2 = v.charCodeAt(end - 1);
  return d1 >= 48 && d1 <= 57 && d2 >= 48 && d2 <= 57;
}

/** The route with the upstream a plugin chose instead of its own (traffic-split), if one did. */
function withChoice(route: MatchedRoute, ctx: RequestContext): MatchedRoute {
  const choice = ctx.upstreamChoice;
  return choice ? { ...route, upstream: choice.upstream, upstreamKey: choice.key, missing: undefined } : route;
}

/** The key `chash` hashes (hash_on vars / header / cookie / consumer). */
function hashKey(u: { type?: string; hash_on?: string; key?: string }, ctx: RequestContext): string {
  if (u.type !== 'chash') return '';
  const key = u.key ?? '';
  switch (u.hash_on ?? 'vars') {
    case 'header': return ctx.header(key) ?? '';
    case 'cookie': return ctx.variable(`cookie_${key}`) ?? '';
    case 'consumer': return ctx.consumer?.username ?? ctx.variable('remote_addr') ?? '';
    case 'vars_combinations': return key.replace(/\$\{?(\w+)\}?/g, (_, v: string) => ctx.variable(v) ?? '');
    default: return ctx.variable(key) ?? '';
  }
}

/** A consumer's plugins without its auth confs (those identify it; they are not route confs). */
function withoutAuth(plugins: Plugins, registry: PluginRegistry): Plugins {
  const out: Plugins = {};
  for (const [name, conf] of Object.entries(plugins)) if (registry.get(name)?.type !== 'auth') out[name] = conf;
  return out;
}

/** Whether a link runs for this request (its `_meta.filter`, decided once per request). */
function runs(l: ChainLink, ctx: PluginContext): boolean {
  if (!l.filter) return true;
  let ok = ctx.state.get(l) as boolean | undefined;
  if (ok === undefined) ctx.state.set(l, (ok = l.filter(ctx.variable)));
  return ok;
}

type Maybe<T> = T | Promise<T>;

/** `fn` on the value, at once when there is one, after the promise otherwise. */
function then<T, U>(x: Maybe<T>, fn: (v: T) => Maybe<U>): Maybe<U> {
  return x instanceof Promise ? x.then(fn) : fn(x);
}

/** A phase's answer ends the request; without one the request goes on with `next`. */
function after(a: Maybe<PhaseResult>, r: HttpRequest, ctx: RequestContext, codes: PhaseCodes, next: () => number | Promise<number>): number | Promise<number> {
  if (a instanceof Promise) return a.then((x) => (x ? answer(r, ctx, x, codes) : next()));
  return a ? answer(r, ctx, a, codes) : next();
}

/** A phase of a chain, from link `from`: the first answer, or a promise of it when a function waits. */
function runPhase(chain: ChainLink[], phase: 'rewrite' | 'access' | 'beforeProxy', ctx: PluginContext, from = 0): Maybe<PluginAnswer | undefined> {
  for (let i = from; i < chain.length; i++) {
    const l = chain[i];
    const fn = l.plugin[phase];
    if (!fn || !runs(l, ctx)) continue;
    let a: PhaseResult | Promise<PhaseResult>;
    try {
      a = fn.call(l.plugin, l.conf, ctx);
    } catch {
      // a plugin that fails (a pattern it cannot compile) answers 500, as a Lua error in a phase does
      return { status: 500 };
    }
    if (a instanceof Promise) {
      const next = i + 1;
      return a.then((x) => (x ? withErrorResponse(l, x) : runPhase(chain, phase, ctx, next)), () => ({ status: 500 }));
    }
    if (a) return withErrorResponse(l, a);
  }
  return undefined;
}

/** core.response.exit: a table body as JSON with a newline; no body: nginx's page for the status. */
function answer(r: HttpRequest, ctx: RequestContext, a: PluginAnswer, codes: PhaseCodes): number | Promise<number> {
  ctx.answered = true;
  if (a.engineCode !== undefined) return a.engineCode;
  let type = r.contentType ?? 'text/plain';
  for (const [k, v] of Object.entries(a.headers ?? {})) {
    // as ngx.header['Content-Type']: the response's type, not a second header
    if (k.toLowerCase() === 'content-type') type = v;
    else ctx.setResponseHeader(k, v);
  }
  // as Lua's ngx.header.Location: sent as given (a relative one is not made absolute)
  if (a.location !== undefined) ctx.setResponseHeader('Location', a.location);
  if (a.body === undefined) return a.status;
  // a Buffer goes as its bytes (an auth service's answer, forward-auth)
  const bytes = Buffer.isBuffer(a.body) ? a.body : Buffer.from(typeof a.body === 'string' ? a.body : JSON.stringify(a.body) + '\n');
  return sendSimple(r, a.status, bytes, type).then(() => codes.done);
}

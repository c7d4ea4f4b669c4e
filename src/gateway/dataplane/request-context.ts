/**
 * One request as gateway plugins see it (APISIX's api_ctx with ngx.req and
 * ngx.header): variables, request headers they may change before proxying,
 * the upstream URI/Host/method they may choose, the consumer an auth plugin
 * found, and response headers queued until the header filter.
 */
import fs from 'node:fs/promises';
import { cidrMatch, clientAddrOf } from '../../core/inet.ts';
import type { Cidr } from '../../core/inet.ts';
import type { HttpRequest } from '../../http/request.ts';
import { readRequestBody, replaceBody, requestBodyOf, setClientMaxBodySize } from '../../http/request-body.ts';
import { setRequestBuffering } from '../../http/upstream/send-body.ts';
import { escapeUri } from '../../http/uri.ts';
import type { PluginContext } from '../plugins/phase-api.ts';
import type { Consumer, UpstreamConf } from '../router/config-view.ts';
import type { MatchedRoute, RouteMatch } from '../router/router.ts';
import type { VarReader } from '../router/expr.ts';

/** The parts of config.yaml plugins read: plugin_attr, apisix.ssl.listen's ports. */
export interface LocalConf {
  pluginAttr: Record<string, Record<string, unknown>>;
  sslPorts: readonly number[];
  /** apisix.trusted_addresses (undefined: not configured). */
  trustedAddresses?: readonly Cidr[];
}

type ConsumerKeys = Map<string, { consumer: Consumer; credentialId: string | undefined }>;

function decodeArg(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
}

/** Name/value pairs as a table of lowercased names, a repeated name's values as a list. */
function headerTable(flat: readonly string[]): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const name = flat[i].toLowerCase();
    const had = out[name];
    out[name] = had === undefined ? flat[i + 1] : Array.isArray(had) ? [...had, flat[i + 1]] : [had, flat[i + 1]];
  }
  return out;
}

/**
 * The X-Forwarded-* headers APISIX's configuration writes into the request before any plugin
 * (ngx_tpl.lua's more_set_input_headers): the client's own are replaced, and a plugin may change
 * them (proxy-rewrite `headers`). Host is the Host header as sent (port included; none: `$host`),
 * Port the Host header's port, else the port the request came to; Forwarded goes. With
 * apisix.trusted_addresses (init.lua's handle_trusted_x_forwarded_headers) a trusted peer's
 * own values are put back, and an untrusted peer's X-Forwarded-For goes.
 */
export function forwardedHeaders(ctx: RequestContext, rawHost: string): void {
  const names = ['X-Forwarded-Proto', 'X-Forwarded-Host', 'X-Forwarded-Port', 'Forwarded'];
  const sent = names.map((n) => ctx.header(n));
  ctx.setRequestHeader('X-Forwarded-Proto', ctx.variable('scheme'));
  ctx.setRequestHeader('X-Forwarded-Host', rawHost === '' ? ctx.variable('host') : rawHost);
  ctx.setRequestHeader('X-Forwarded-Port', /:(\d+)$/.exec(rawHost)?.[1] ?? ctx.variable('server_port'));
  ctx.setRequestHeader('Forwarded', undefined);
  const trusted = ctx.localConf.trustedAddresses;
  if (!trusted) return;
  if (cidrMatch(clientAddrOf(ctx.variable('realip_remote_addr') ?? ctx.variable('remote_addr') ?? '', 0), trusted)) {
    names.forEach((n, i) => { if (sent[i]) ctx.setRequestHeader(n, sent[i]); });
  } else ctx.setRequestHeader('X-Forwarded-For', undefined);
}

/** What a route's plugin state is counted under (ctx.routeKey): `route#id`, or `global` without a route. */
export function routeKeyOf(route: MatchedRoute | undefined): string {
  return route ? `route#${route.id}` : 'global';
}

export class RequestContext implements PluginContext {
  readonly r: HttpRequest;
  readonly route: MatchedRoute | undefined;
  /** Whose plugin conf runs: the route's (`route#id`), or a global rule's while its plugins run. */
  routeKey: string;
  readonly matchedUri: string;
  readonly matchedHost: string;
  readonly state = new Map<object, unknown>();
  consumer: Consumer | undefined;
  credentialId: string | undefined;
  status = 0;
  upstreamHost: string | undefined;
  upstreamMethod: string | undefined;
  upstreamScheme = 'http';
  websocket = false;
  gzipLevel: number | undefined;
  brotli: PluginContext['brotli'] = undefined;
  delayMs = 0;
  answered = false;
  /** A plugin's choice of upstream instead of the route's (traffic-split). */
  upstreamChoice: { upstream: UpstreamConf; key: string } | undefined;
  /** The configuration version's upstream objects (set by the request path). */
  upstreams: Map<string, UpstreamConf> | undefined;
  /** What config.yaml says that plugins read (set by the request path). */
  localConf: LocalConf = { pluginAttr: {}, sslPorts: [] };
  /** The configuration version's plugin metadata (set by the request path). */
  metadata: Map<string, Record<string, unknown>> | undefined;
  private uri: string | undefined;
  private args: string | undefined;
  private readonly pending: Array<[name: string, value: string | undefined, add: boolean]> = [];
  private readonly keys: ConsumerKeys;
  private readonly consumers: Map<string, Consumer>;
  readonly variable: VarReader;

  constructor(r: HttpRequest, hit: RouteMatch | undefined, keys: ConsumerKeys, consumers: Map<string, Consumer>, read: VarReader) {
    this.r = r;
    const route = hit?.route;
    this.route = route;
    this.matchedUri = hit?.written ?? '';
    this.matchedHost = hit?.host ?? '';
    this.routeKey = routeKeyOf(route);
    this.keys = keys;
    this.consumers = consumers;
    // APISIX's ctx.var caches the path the router read: a later ngx.req.set_uri does not change it
    const routedUri = r.uri;
    // APISIX's ctx.var also answers its own names (apisix/core/ctx.lua): the matched route's, the consumer's...
    this.variable = (name) => {
      switch (name) {
        case 'route_id': return this.route?.id;
        case 'route_name': return (this.route?.conf as { name?: string } | undefined)?.name;
        case 'service_id': return this.route?.conf.service_id === undefined ? undefined : String(this.route.conf.service_id);
        case 'consumer_name': return this.consumer?.username;
        // apisix/init.lua: request_uri is the normalized path and the arguments (a `/./` or `//` cannot slip past
        // uri-blocker, redirect...), the client's own text is real_request_uri
        case 'uri': return routedUri;
        case 'request_uri': return `${routedUri}${read('is_args') ?? ''}${read('args') ?? ''}`;
        case 'real_request_uri': return read('request_uri');
        // the node the last try went to (APISIX's api_ctx.balancer_ip / balancer_port)
        case 'balancer_ip': case 'balancer_port': {
          const addr = read('upstream_addr')?.split(/[,:] /).pop();
          const colon = addr?.lastIndexOf(':') ?? -1;
          if (addr === undefined || colon < 0) return undefined;
          return name === 'balancer_ip' ? addr.slice(0, colon).replace(/^\[(.*)\]$/, '$1') : addr.slice(colon + 1);
        }
        default: return read(name);
      }
    };
  }

  get method(): string {
    return this.r.method;
  }

  header(name: string): string | undefined {
    return this.r.header(name.toLowerCase());
  }

  headerValues(name: string): string[] {
    return this.r.headerValues(name.toLowerCase());
  }

  requestHeaders(): Record<string, string | string[]> {
    return headerTable(this.r.headersIn);
  }

  responseHeaders(): Record<string, string | string[]> {
    const flat: string[] = [];
    if (this.r.contentType !== undefined) flat.push('content-type', this.r.contentType);
    if (this.r.contentLength !== undefined) flat.push('content-length', String(this.r.contentLength));
    for (const h of this.r.headersOut) flat.push(h.name, h.value);
    return headerTable(flat);
  }

  get startTime(): number {
    return this.r.startMs;
  }

  arg(name: string): string | undefined {
    for (const pair of (this.args ?? this.r.args).split('&')) {
      const eq = pair.indexOf('=');
      const k = eq < 0 ? pair : pair.slice(0, eq);
      if (decodeArg(k) === name) return eq < 0 ? '' : decodeArg(pair.slice(eq + 1));
    }
    return undefined;
  }

  removeArg(name: string): void {
    const kept = (this.args ?? this.r.args).split('&').filter((pair) => {
      const eq = pair.indexOf('=');
      return decodeArg(eq < 0 ? pair : pair.slice(0, eq)) !== name;
    });
    this.args = kept.join('&');
  }

  /** The URI proxied: a plugin's choice, else the request's path (escaped) and arguments. */
  get upstreamUri(): string {
    const path = this.uri ?? escapeUri(this.r.uri);
    const args = this.args ?? this.r.args;
    return args !== '' || (this.args === undefined && this.r.hasArgs) ? `${path}?${args}` : path;
  }

  set upstreamUri(value: string) {
    const q = value.indexOf('?');
    this.uri = q < 0 ? value : value.slice(0, q);
    if (q >= 0) this.args = value.slice(q + 1);
  }

  setUri(uri: string): void {
    this.r.uri = uri;
  }

  setRequestHeader(name: string, value: string | undefined): void {
    const list = this.r.headersIn as string[];
    const lower = name.toLowerCase();
    let at = -1;
    for (let i = list.length - 2; i >= 0; i -= 2) {
      if (list[i].toLowerCase() !== lower) continue;
      list.splice(i, 2);
      at = i;
    }
    if (value === undefined) return;
    if (at >= 0) list.splice(at, 0, name, value);
    else list.push(name, value);
  }

  addRequestHeader(name: string, value: string): void {
    (this.r.headersIn as string[]).push(name, value);
  }

  setClientAddress(ip: string, port: number | undefined): void {
    const r = this.r;
    r.realAddress = { text: ip, port: port ?? r.remotePort };
    // values read before are the connection's (APISIX flushes its cached vars too)
    for (const name of ['remote_addr', 'remote_port']) delete r.varCache[r.main.variables.index(name)];
  }

  async requestBody(maxSize?: number): Promise<Buffer | { error: string } | number> {
    const over = (n: number) => maxSize !== undefined && n > maxSize ? { error: `request size ${n} is greater than the maximum size ${maxSize} allowed` } : undefined;
    const declared = Number(this.header('content-length') ?? NaN);
    const early = Number.isNaN(declared) ? undefined : over(declared);
    if (early) return early;
    const got = await readRequestBody(this.r);
    if (typeof got === 'number') return got;
    const body = got.file !== undefined ? await fs.readFile(got.file) : Buffer.concat(got.bufs);
    return over(body.length) ?? body;
  }

  setRequestBody(body: Buffer): void {
    const read = requestBodyOf(this.r);
    if (read) replaceBody(this.r, read, [body]);
  }

  setClientMaxBodySize(max: number): void {
    setClientMaxBodySize(this.r, max);
  }

  setRequestBuffering(on: boolean): void {
    setRequestBuffering(this.r, on);
  }


  findConsumer(plugin: string, field: string, value: string): { consumer: Consumer; credentialId: string | undefined } | undefined {
    return this.keys.get(`${plugin}\0${field}\0${value}`);
  }

  upstreamById(id: string): UpstreamConf | undefined {
    return this.upstreams?.get(id);
  }

  pluginAttr(name: string): Record<string, unknown> | undefined {
    return this.localConf.pluginAttr[name];
  }

  get sslPorts(): readonly number[] {
    return this.localConf.sslPorts;
  }

  pluginMetadata(name: string): Record<string, unknown> | undefined {
    return this.metadata?.get(name);
  }

  useUpstream(upstream: UpstreamConf, key: string): void {
    this.upstreamChoice = { upstream, key };
  }

  consumerByName(name: string): Consumer | undefined {
    return this.consumers.get(name);
  }

  attachConsumer(consumer: Consumer, credentialId: string | undefined): void {
    this.consumer = consumer;
    this.credentialId = credentialId;
    // what APISIX tells the upstream about who called (apisix/consumer.lua attach_consumer)
    this.setRequestHeader('X-Consumer-Username', consumer.username);
    this.setRequestHeader('X-Credential-Identifier', credentialId);
    this.setRequestHeader('X-Consumer-Custom-ID', consumer.customId);
  }

  /** Before the header filter: queued; in it, on the response at once. */
  setResponseHeader(name: string, value: string | undefined): void {
    if (this.status === 0) this.pending.push([name, value, false]);
    else this.r.setHeader(name, value);
  }

  addResponseHeader(name: string, value: string): void {
    if (this.status === 0) this.pending.push([name, value, true]);
    else this.r.addHeader(name, value);
  }

  responseHeader(name: string): string | undefined {
    return this.r.getHeader(name);
  }

  delay(ms: number): void {
    this.delayMs += ms;
  }

  get responseContentType(): string | undefined {
    return this.r.contentType;
  }

  get responseLength(): number | undefined {
    return this.r.contentLength;
  }

  get httpVersion(): number {
    return Number(this.r.httpVersion);
  }

  /** The header filter's start: the headers plugins set before the response existed. */
  flushResponseHeaders(): void {
    for (const [name, value, add] of this.pending) {
      if (add) this.r.addHeader(name, value!);
      else this.r.setHeader(name, value);
    }
    this.pending.length = 0;
  }
}

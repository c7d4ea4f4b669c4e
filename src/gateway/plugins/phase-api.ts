/**
 * What a gateway plugin's phase functions see and return (APISIX's
 * `_M.rewrite(conf, ctx)`, `_M.access`, `_M.header_filter`,
 * `_M.body_filter`, `_M.log`). A phase function that answers the request
 * returns `{ status, body }` as `core.response.exit(status, body)` does: a
 * body object goes out as JSON with a trailing newline.
 */
import type { Consumer, UpstreamConf } from '../router/config-view.ts';
import type { MatchedRoute } from '../router/router.ts';

export interface PluginAnswer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** The Location of a redirect (nginx's page for the status goes with it). */
  location?: string;
  /**
   * The phase handler's result for the engine when Lua ended the request
   * itself (`ngx.exit`, `ngx.say`: the response is written, or the engine's
   * page for the code goes out); `status` is then the code for the log.
   */
  engineCode?: number;
}

/** A piece of the response body as a body filter sees it (`ngx.arg[1]`, `ngx.arg[2]`). */
export interface BodyChunk { chunk: Buffer; eof: boolean }

export type PhaseResult = PluginAnswer | undefined | void;

export interface PluginContext {
  /** The matched route (undefined while global rules run for a request no route matched). */
  route: MatchedRoute | undefined;
  /** The uri and host patterns that selected the route (radixtree's `_path` and `_host`; `''` without). */
  readonly matchedUri: string;
  readonly matchedHost: string;
  /** Whose plugin conf runs: `route#id`, or `global_rule#id` while a global rule's run (the limiters count under it). */
  routeKey: string;
  /** An nginx variable of the request (`remote_addr`, `arg_x`, `http_x`, `cookie_x`, ...). */
  variable(name: string): string | undefined;
  /** First request header (any case). */
  header(name: string): string | undefined;
  /** Every value of a request header (any case), in order (core.request.headers' table for a repeated one). */
  headerValues(name: string): string[];
  /** All request headers as ngx.req.get_headers gives them: names lowercased, a repeated one as a list. */
  requestHeaders(): Record<string, string | string[]>;
  /** The response's headers as ngx.resp.get_headers gives them (log phase), Content-Type and Content-Length with them. */
  responseHeaders(): Record<string, string | string[]>;
  /** When the request started, in ms since the epoch (ngx.req.start_time() × 1000). */
  readonly startTime: number;
  /** A query argument, decoded. */
  arg(name: string): string | undefined;
  /** Sets (or with undefined removes) a request header sent upstream. */
  setRequestHeader(name: string, value: string | undefined): void;
  addRequestHeader(name: string, value: string): void;
  /** Removes a query argument from the URI sent upstream. */
  removeArg(name: string): void;
  /**
   * The whole request body, read once and still proxied (core.request.get_body):
   * its bytes, APISIX's message when it is over `maxSize`, or the status reading failed with.
   */
  requestBody(maxSize?: number): Promise<Buffer | { error: string } | number>;
  /** After requestBody: the body proxied becomes `body` (ngx.req.set_body_data). */
  setRequestBody(body: Buffer): void;
  /** The request body's limit from here on, 0 none (client-control; a bigger body is a 413 as it is read). */
  setClientMaxBodySize(max: number): void;
  /** Whether the body is read whole before it is proxied (proxy-control; else it streams as it comes). */
  setRequestBuffering(on: boolean): void;
  method: string;
  /** The client's address from here on (`$remote_addr`, `$remote_port`), as nginx's realip sets it. */
  setClientAddress(ip: string, port: number | undefined): void;
  /** ngx.req.set_uri: `$uri` from here on for Lua and the log (the plugins' `variable('uri')` keeps the routed path, as APISIX's cached ctx.var.uri). */
  setUri(uri: string): void;
  /** Upstream request line parts plugins may change (proxy-rewrite). */
  upstreamUri: string;
  upstreamHost: string | undefined;
  upstreamMethod: string | undefined;
  /** An upstream object of the configuration version, by id (traffic-split). */
  upstreamById(id: string): UpstreamConf | undefined;
  /** Proxies to `upstream` instead of the route's; `key` names its balancer state (traffic-split). */
  useUpstream(upstream: UpstreamConf, key: string): void;
  /** config.yaml's plugin_attr.NAME (APISIX's plugin.plugin_attr). */
  pluginAttr(name: string): Record<string, unknown> | undefined;
  /** The ports of apisix.ssl.listen (none when apisix.ssl is off). */
  readonly sslPorts: readonly number[];
  /** The plugin's metadata object of the configuration version (`/plugin_metadata/NAME`). */
  pluginMetadata(name: string): Record<string, unknown> | undefined;
  /** Consumers whose `plugin` conf has `field` equal to `value` (auth plugins). */
  findConsumer(plugin: string, field: string, value: string): { consumer: Consumer; credentialId: string | undefined } | undefined;
  consumerByName(name: string): Consumer | undefined;
  attachConsumer(consumer: Consumer, credentialId: string | undefined): void;
  consumer: Consumer | undefined;
  /** Response side (header_filter): status and headers as they will be sent. */
  status: number;
  setResponseHeader(name: string, value: string | undefined): void;
  addResponseHeader(name: string, value: string): void;
  responseHeader(name: string): string | undefined;
  /** The response's Content-Type and Content-Length (header_filter). */
  readonly responseContentType: string | undefined;
  readonly responseLength: number | undefined;
  /** The request's HTTP version as a number (1.0, 1.1, 2). */
  readonly httpVersion: number;
  /** The request waits `ms` more before it is proxied (limit-req's delay; the access phase ends first). */
  delay(ms: number): void;
  /** Set by gzip's header_filter: compress this response at this level (APISIX-Runtime's set_gzip). */
  gzipLevel: number | undefined;
  /** Set by brotli's header_filter: compress this response so (after the body filters, as gzip). */
  brotli: { quality: number; lgwin: number; lgblock: number; mode: number } | undefined;
  /** The gateway answered the request itself (a plugin's or the router's core.response.exit), not the upstream. */
  readonly answered: boolean;
  /** Per-request state of a plugin. */
  state: Map<object, unknown>;
}

export interface PhaseFunctions<C> {
  /** rewrite / access / before_proxy may wait (a Lua function that sleeps): a promise of the result. */
  rewrite?(conf: C, ctx: PluginContext): PhaseResult | Promise<PhaseResult>;
  access?(conf: C, ctx: PluginContext): PhaseResult | Promise<PhaseResult>;
  /** After every access function, before the upstream is chosen (APISIX's before_proxy). */
  beforeProxy?(conf: C, ctx: PluginContext): PhaseResult | Promise<PhaseResult>;
  headerFilter?(conf: C, ctx: PluginContext): void;
  /** The request is over (APISIX's log phase): release what access took. */
  log?(conf: C, ctx: PluginContext): void;
  /** Whole-body replacement: returns the body to send instead (called once, at the end). */
  replaceBody?(conf: C, ctx: PluginContext): Buffer | undefined;
  /** Whether bodyFilter takes part in this response (asked after the header filters; without it: yes). */
  filtersBody?(conf: C, ctx: PluginContext): boolean;
  /** Its body filter encodes the same entity: the response's ETag (as its header filter left it) stays. */
  keepsEtag?: boolean;
  /** Each piece of the response body, in priority order: what goes on instead (undefined: unchanged). */
  bodyFilter?(conf: C, ctx: PluginContext, piece: BodyChunk): BodyChunk | undefined;
  /** Checks beyond the schema (APISIX's check_schema): undefined, or the message; `metadata` reads the plugin's stored metadata. */
  checkConf?(conf: C, metadata: () => Promise<Record<string, unknown> | undefined>): string | undefined | Promise<string | undefined>;
  /** The same for a consumer or credential conf, defaults filled (check_schema with TYPE_CONSUMER). */
  checkConsumerConf?(conf: Record<string, unknown>): string | undefined;
}

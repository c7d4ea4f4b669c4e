/**
 * The shape of a loaded `http {}` block: the main configuration with its
 * variables and phase handlers, virtual servers, locations, and the module
 * interface HTTP modules implement.
 */
import { defineSlot } from '../conf/context.ts';
import type { ConfContext, Level } from '../conf/context.ts';
import type { Cycle, CycleModule, ListenSpec } from '../core/cycle.ts';
import type { HttpRequest } from './request.ts';
import type { HttpRegex } from './regex.ts';
import { MAX_BODY_FILTERS } from './body-filter.ts';
import type { BodyFilter, BodyFilterEntry, BodyResume } from './body-filter.ts';
import { VariableRegistry } from '../core/variables.ts';
import type { VariableDef } from '../core/variables.ts';

/** Phase handler results besides an HTTP status code (nginx's NGX_OK, NGX_DECLINED, NGX_DONE). */
export const OK = 0;
/** This handler has nothing to do; the next one runs. */
export const DECLINED = -5;
/** The request was taken over (a response is being sent, or an internal redirect happened). */
export const DONE = -4;

export type HandlerResult = number;
export type PhaseHandler = (r: HttpRequest) => HandlerResult | Promise<HandlerResult>;

/** nginx's request phases, in order. FIND_CONFIG and the POST_* phases are the engine's own. */
export const Phase = {
  POST_READ: 0,
  SERVER_REWRITE: 1,
  REWRITE: 2,
  PREACCESS: 3,
  ACCESS: 4,
  PRECONTENT: 5,
  CONTENT: 6,
  LOG: 7,
} as const;
export type PhaseName = keyof typeof Phase;

/**
 * A header filter runs once, just before the response head is sent; it may
 * change status and headers, and join the request's body filter chain
 * (joinBodyFilter, src/http/body-filter.ts) to transform the body.
 */
export type HeaderFilter = (r: HttpRequest) => void | Promise<void>;

/** A variable of http requests (the machinery is src/core/variables.ts, shared with stream). */
export type HttpVariable = VariableDef<HttpRequest>;

/*
 * Order of filters and phase handlers: a module passes a number when it
 * installs one, and the engine runs lower numbers first (equal numbers in
 * the order installed), so the module list's order does not matter.
 *
 * Filters (header and body share one scale) follow nginx's filter modules,
 * which run in the reverse of their list in ngx_modules (each prepends
 * itself to ngx_http_top_*_filter): slice 100, not_modified 200,
 * range_body 300, copy 400, headers 500, userid 600, gunzip 700,
 * addition 800, sub 900, image 1000, xslt 1100, charset 1200, ssi 1300,
 * postpone 1400, gzip 1500, range_header 1600, v2 1700, chunked 1800; then
 * the engine writes the head (ngx_http_header_filter) or the body into the
 * sink (ngx_http_write_filter).
 *
 * Phase handlers of one phase run in the reverse of nginx's module list
 * (nginx walks each phase's array from the last registered): numbers are
 * given per phase at each call site, with the nginx order they follow.
 */

export interface HttpModule extends CycleModule {
  /** Variables this module defines (added before the http block is read). */
  variables?: HttpVariable[];
  /** After the http block is read and merged: install phase handlers and filters. `cf` is at the http block (for nginx's merge-time warnings). */
  postconfiguration?(http: HttpMainConf, cf: ConfContext): void;
}

export function isHttpModule(m: CycleModule): m is HttpModule {
  return m.name.startsWith('ngx_http_');
}

/** How a location matches: nginx's `=`, `^~`, prefix, `~`, `~*`, and `@name`. */
export type LocationMatch = 'exact' | 'prefix-stop' | 'prefix' | 'regex' | 'named' | 'noname';

export interface LocationConf {
  /** As written: `/images/`, `~ \.php$`, `@fallback`. */
  name: string;
  match: LocationMatch;
  /** Prefix or exact string (match `exact`/`prefix*`), or the named location's name. */
  path: string;
  regex?: RegExp;
  /** Variables the regex's named groups set (`(?<name>...)` → `$name`). */
  regexNames?: ReadonlyArray<{ name: string; index: number }>;
  /**
   * nginx's auto_redirect: a proxy-like content handler (proxy_pass,
   * fastcgi_pass, ...) sets it when the name ends with `/`, so `/dir`
   * answers 301 to `/dir/`.
   */
  autoRedirect?: boolean;
  /** Configuration of every module at this location (merged from server and parents). */
  level: Level;
  /** Locations nested inside this one. */
  children: LocationConf[];
  parent?: LocationConf;
  internal: boolean;
  /** The content handler owned by this location (proxy_pass, return-only, lua, ...). */
  contentHandler?: PhaseHandler;
  /** `if` blocks and `limit_except` make anonymous locations. */
  noname?: boolean;
  /** `limit_except` methods allowed (uppercased), with its own level. */
  limitExcept?: { methods: Set<string>; loc: LocationConf };
  file: string;
  line: number;
}

/** A parsed `listen` directive's per-server options. */
export interface ListenConf {
  spec: ListenSpec;
  defaultServer: boolean;
  ssl: boolean;
  http2: boolean;
  proxyProtocol: boolean;
}

export interface ServerName {
  /** Lowercased; a regex name without its `~`. */
  name: string;
  regex?: RegExp;
  /** The regex with its named captures as variables. */
  httpRegex?: HttpRegex;
}

export interface ServerConf {
  listens: ListenConf[];
  names: ServerName[];
  /** The first name, nginx's `$server_name` and name for redirects. */
  primaryName: string;
  level: Level;
  /** Locations of this server (top level; nested ones hang off their parents). */
  locations: LocationConf[];
  /** Named (`@name`) locations. */
  named: Map<string, LocationConf>;
  /** The server-level pseudo location used before a location is chosen. */
  serverLoc: LocationConf;
  file: string;
  line: number;
}

/** Servers reachable through one listening socket, with the default first. */
export interface AddressConf {
  spec: ListenSpec;
  servers: ServerConf[];
  defaultServer: ServerConf;
  ssl: boolean;
  http2: boolean;
  /** Connections start with a PROXY protocol header (`listen … proxy_protocol`). */
  proxyProtocol?: boolean;
}

export class HttpMainConf {
  readonly level: Level;
  readonly variables = new VariableRegistry<HttpRequest>();
  readonly servers: ServerConf[] = [];
  readonly addresses = new Map<string, AddressConf>();
  readonly phases: PhaseHandler[][] = Object.values(Phase).map(() => []);
  private readonly phaseOrders: number[][] = Object.values(Phase).map(() => []);
  readonly headerFilters: HeaderFilter[] = [];
  private readonly headerOrders: number[] = [];
  /** The header filters that also run for subrequests (src/http/subrequest.ts). */
  readonly subrequestHeaderFilters: HeaderFilter[] = [];
  /** A module reads request heads as received (ngx.req.raw_header): the head reader keeps a copy. */
  keepRawHeads = false;
  private readonly subrequestHeaderOrders: number[] = [];
  /** The body filter chain, by order (src/http/body-filter.ts). */
  readonly bodyFilters: BodyFilterEntry[] = [];
  readonly modules: HttpModule[];
  /**
   * `error_page` handling, installed by the module that owns it: returns true
   * when it answered the request for `status` (redirect, internal redirect).
   */
  errorPage: ((r: HttpRequest, status: number) => Promise<boolean>) | undefined;

  constructor(level: Level, modules: HttpModule[]) {
    this.level = level;
    this.modules = modules;
  }

  /** Adds a handler to `phase`, run before those of a higher `order` (see above). */
  addPhaseHandler(phase: PhaseName, order: number, handler: PhaseHandler): void {
    insertOrdered(this.phases[Phase[phase]], this.phaseOrders[Phase[phase]], order, handler);
  }

  /**
   * Adds a header filter at `order` (see above); with `subrequests` it also
   * runs for subrequests (SSI, sub_filter), where most nginx filters step
   * aside (r != r->main).
   */
  addHeaderFilter(order: number, filter: HeaderFilter, opts?: { subrequests?: boolean }): void {
    insertOrdered(this.headerFilters, this.headerOrders, order, filter);
    if (opts?.subrequests) insertOrdered(this.subrequestHeaderFilters, this.subrequestHeaderOrders, order, filter);
  }

  /**
   * Adds a body filter at `order` (see above). A request's body goes through
   * it once its header filter joined it (joinBodyFilter with the entry
   * returned); `resume` is called when the filters after it can take more.
   */
  addBodyFilter(order: number, filter: BodyFilter, resume?: BodyResume): BodyFilterEntry {
    const chain = this.bodyFilters;
    if (chain.length === MAX_BODY_FILTERS) throw new Error(`more than ${MAX_BODY_FILTERS} body filters`);
    let at = chain.length;
    while (at > 0 && chain[at - 1].order > order) at--;
    const entry: BodyFilterEntry = { order, filter, resume, index: at };
    chain.splice(at, 0, entry);
    for (let i = at + 1; i < chain.length; i++) chain[i].index = i;
    return entry;
  }
}

/** Inserts `item` after every entry of an order up to `order`. */
function insertOrdered<T>(list: T[], orders: number[], order: number, item: T): void {
  let at = list.length;
  while (at > 0 && orders[at - 1] > order) at--;
  list.splice(at, 0, item);
  orders.splice(at, 0, order);
}

/** The main conf while the http block is being read (for handlers that compile variables). */
export function httpMainOf(cf: ConfContext): HttpMainConf {
  return cf.data.http as HttpMainConf;
}

/** The loaded `http {}` block of a cycle (one per configuration). */
export const httpSlot = defineSlot<{ conf?: HttpMainConf }>('http', () => ({}));

/** The `http {}` block a cycle loaded, if any. */
export function httpConf(cycle: Cycle): HttpMainConf | undefined {
  return cycle.main.get(httpSlot).conf;
}

/**
 * The shape of a loaded `http {}` block: the main configuration with its
 * variables and phase handlers, virtual servers, locations, and the module
 * interface HTTP modules implement.
 */
import type { ConfContext, Level } from '../conf/context.ts';
import type { CycleModule, ListenSpec } from '../core/cycle.ts';
import type { HttpRequest } from './request.ts';
import type { HttpRegex } from './regex.ts';
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
 * change status and headers, and may replace `r.out` with a stream that
 * transforms the body (gzip, Lua body filters) and writes to the old `r.out`.
 */
export type HeaderFilter = (r: HttpRequest) => void | Promise<void>;

/** A variable of http requests (the machinery is src/core/variables.ts, shared with stream). */
export type HttpVariable = VariableDef<HttpRequest>;

export interface HttpModule extends CycleModule {
  /** Variables this module defines (added before the http block is read). */
  variables?: HttpVariable[];
  /** After the http block is read and merged: install phase handlers and filters. */
  postconfiguration?(http: HttpMainConf): void;
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
  readonly headerFilters: HeaderFilter[] = [];
  /** The header filters that also run for subrequests (src/http/subrequest.ts). */
  readonly subrequestHeaderFilters: HeaderFilter[] = [];
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

  addPhaseHandler(phase: PhaseName, handler: PhaseHandler): void {
    this.phases[Phase[phase]].push(handler);
  }

  /**
   * Adds a header filter; with `subrequests` it also runs for subrequests
   * (SSI, sub_filter), where most nginx filters step aside (r != r->main).
   */
  addHeaderFilter(filter: HeaderFilter, opts?: { subrequests?: boolean }): void {
    this.headerFilters.push(filter);
    if (opts?.subrequests) this.subrequestHeaderFilters.push(filter);
  }
}

/** The main conf while the http block is being read (for handlers that compile variables). */
export function httpMainOf(cf: ConfContext): HttpMainConf {
  return cf.data.http as HttpMainConf;
}

/**
 * The shape of a loaded `stream {}` block (nginx's ngx_stream_core_main_conf_t
 * and friends): servers and the addresses they listen on, the variables of
 * the block, the phase handlers modules install, and the interface stream
 * modules implement.
 */
import type { ConfContext, Level } from '../conf/context.ts';
import { defineSlot } from '../conf/context.ts';
import type { Cycle, CycleModule, ListenSpec } from '../core/cycle.ts';
import { VariableRegistry } from '../core/variables.ts';
import type { VariableDef } from '../core/variables.ts';
import type { StreamSession } from './session.ts';
import type { ServerName } from '../core/server-names.ts';

/** Phase handler results besides a status code (nginx's NGX_OK, NGX_DECLINED, NGX_DONE). */
export const OK = 0;
export const DECLINED = -5;
/** The handler took the session over (it will finalize it). */
export const DONE = -4;

/** Status codes of a session (`$status`), as nginx's NGX_STREAM_* codes. */
export const Status = {
  OK: 200,
  BAD_REQUEST: 400,
  FORBIDDEN: 403,
  INTERNAL_SERVER_ERROR: 500,
  BAD_GATEWAY: 502,
  SERVICE_UNAVAILABLE: 503,
} as const;

/**
 * nginx's stream phases before content, in order. A handler returns OK (the
 * phase is done), DECLINED (next handler), DONE, or a status that ends the
 * session; it may be asynchronous (Lua hooks, later).
 */
export const StreamPhase = {
  POST_ACCEPT: 0,
  PREACCESS: 1,
  ACCESS: 2,
  SSL: 3,
  PREREAD: 4,
} as const;
export type StreamPhaseName = keyof typeof StreamPhase;

export type StreamPhaseHandler = (s: StreamSession) => number | Promise<number>;
/** A server's content handler (proxy_pass, return): it owns the session until it finalizes it. */
export type StreamContentHandler = (s: StreamSession) => void;
export type StreamLogHandler = (s: StreamSession) => void;

export type StreamVariable = VariableDef<StreamSession>;

export interface StreamModule extends CycleModule {
  /** Variables this module defines (added before the stream block is read). */
  variables?: StreamVariable[];
  /** After the stream block is read and merged: install phase and log handlers. `cf` is at the stream block. */
  postconfiguration?(stream: StreamMainConf, cf: ConfContext): void;
}

export function isStreamModule(m: CycleModule): m is StreamModule {
  return m.name.startsWith('ngx_stream_');
}

/** One `listen` of a stream server. */
export interface StreamListen {
  spec: ListenSpec;
  /** nginx's listening->addr_text: `127.0.0.1:8080`, `[::1]:8080`, `unix:/path` (the `server:` of log lines). */
  addrText: string;
  udp: boolean;
  ssl: boolean;
  proxyProtocol: boolean;
  /** `default_server`: this server serves the address when no name chooses another. */
  defaultServer: boolean;
}

export interface StreamServerConf {
  listens: StreamListen[];
  /** `server_name` (nginx ≥ 1.25.5): chosen by the TLS SNI or the preread one. */
  names: ServerName[];
  /** `$server_name`: the first name. */
  primaryName: string;
  level: Level;
  handler?: StreamContentHandler;
  file: string;
  line: number;
}

/**
 * A listening address and the servers behind it: the default one serves
 * until a name (TLS SNI, ssl_preread) chooses another (nginx ≥ 1.25.5).
 */
export interface StreamAddress {
  /** The address's listen (its parameters joined over every server that lists it). */
  listen: StreamListen;
  defaultServer: StreamServerConf;
  servers: StreamServerConf[];
}

export class StreamMainConf {
  readonly level: Level;
  readonly variables = new VariableRegistry<StreamSession>();
  readonly servers: StreamServerConf[] = [];
  readonly addresses = new Map<string, StreamAddress>();
  readonly phases: StreamPhaseHandler[][] = Object.values(StreamPhase).map(() => []);
  readonly logHandlers: StreamLogHandler[] = [];
  readonly modules: StreamModule[];

  constructor(level: Level, modules: StreamModule[]) {
    this.level = level;
    this.modules = modules;
  }

  addPhaseHandler(phase: StreamPhaseName, handler: StreamPhaseHandler): void {
    this.phases[StreamPhase[phase]].push(handler);
  }

  addLogHandler(handler: StreamLogHandler): void {
    this.logHandlers.push(handler);
  }
}

/** The loaded `stream {}` block of a cycle. */
export const streamSlot = defineSlot<{ conf?: StreamMainConf }>('stream', () => ({}));

export function streamConf(cycle: Cycle): StreamMainConf | undefined {
  return cycle.main.get(streamSlot).conf;
}

/** The main conf while the stream block is being read. */
export function streamMainOf(cf: ConfContext): StreamMainConf {
  return cf.data.stream as StreamMainConf;
}

/** The server being read (`server {}` handlers set it). */
export function streamServerOf(cf: ConfContext): StreamServerConf {
  return cf.data.streamServer as StreamServerConf;
}

/**
 * A cycle is one loaded configuration (nginx's ngx_cycle_t): the parsed and
 * applied directives of every module, the files read, and the addresses to
 * listen on. The master loads one to check a configuration; each worker
 * loads its own from the same file snapshot to serve it.
 */
import fs from 'node:fs';
import type { RemoteInfo, Socket as DgramSocket } from 'node:dgram';
import { ConfContext, Level } from '../conf/context.ts';
import type { ConfPaths, ConfWarningSink } from '../conf/context.ts';
import { Ctx } from '../conf/directive.ts';
import { ConfError } from '../conf/errors.ts';
import { fullName, parseConfig } from '../conf/parser.ts';
import type { ConfFile } from '../conf/parser.ts';
import { applyBlock, Registry } from '../conf/registry.ts';
import type { ModuleBase } from '../conf/registry.ts';
import type { Socket } from 'node:net';
import type { ErrorLog } from './error-log.ts';
import type { ProcessRole } from './messages.ts';

/** An address to listen on, gathered from `listen` directives. */
export interface ListenSpec {
  /** Unique per bound socket: `127.0.0.1:8080`, `[::1]:80`, `unix:/path`. */
  key: string;
  protocol: 'http' | 'stream';
  host?: string;
  port?: number;
  path?: string;
  backlog?: number;
  ipv6only?: boolean;
  /** TCP keepalive on accepted sockets (`so_keepalive=on`). */
  keepalive?: boolean;
  keepaliveInitialDelayMs?: number;
  /** A UDP socket (stream's `listen … udp`): datagrams, not connections. */
  udp?: boolean;
}

export type ConnectionHandler = (socket: Socket) => void;
/** One datagram read on a UDP listener, and the socket to answer on. */
export type DatagramHandler = (msg: Buffer, from: RemoteInfo, socket: DgramSocket) => void;

/** Hooks a module may add besides its directives. */
export interface CycleModule extends ModuleBase {
  /** After the whole configuration was applied: merge, check, build tables. Runs in master and workers. */
  initCycle?(cycle: Cycle): void;
  /** After every initCycle (and `-t`'s "syntax is ok"): nginx's core init_conf checks, e.g. `no "events" section`. */
  initConf?(cycle: Cycle): void;
  /** In a worker, once per cycle: create the runtime that serves connections. */
  initWorker?(cycle: Cycle, worker: WorkerRuntime): void | Promise<void>;
}

/** What a worker offers a cycle's modules (implemented in src/process/worker.ts). */
export interface WorkerRuntime {
  /** Serve connections accepted on `key` with `handler`. */
  onConnection(key: string, handler: ConnectionHandler): void;
  /** Who serves connections accepted on `key` (stream's `pass` hands a connection over). */
  connectionHandler(key: string): ConnectionHandler | undefined;
  /** Serve datagrams read on the UDP listener `key` with `handler`. */
  onDatagram(key: string, handler: DatagramHandler): void;
  /** Called when this cycle stops serving: graceful (reload, QUIT) or not. */
  onShutdown(fn: (graceful: boolean) => void): void;
  /**
   * A graceful shutdown waits for `work` as for a connection (nginx keeps a
   * worker for its timers' fake connections): a logger's last batch, a Lua
   * timer run at exit. worker_shutdown_timeout still bounds the wait.
   */
  holdShutdown(work: Promise<unknown>): void;
  /** Called once this cycle is done in this worker (its last connection closed, or it was never committed): release files. */
  onClose(fn: () => void): void;
  /** -1 in the privileged agent (nginx's ngx_worker is meaningless there: ngx.worker.id() is nil). */
  readonly workerId: number;
  readonly role: ProcessRole;
  /**
   * OpenResty's `ngx.process.enable_privileged_agent()` from init_by_lua: the master runs one
   * more worker of this configuration that listens on nothing, for timers and housekeeping.
   */
  requestPrivilegedAgent(): void;
  /** `ngx.process.signal_graceful_exit()`: this worker stops gracefully and the master starts another. */
  exitGracefully(): void;
  /** This cycle's error log in this worker (the main log only once the cycle is committed). */
  readonly log: ErrorLog;
}

export interface CycleOptions {
  paths: ConfPaths;
  /** `-g` directives. */
  globals?: string;
  /** Read files from a snapshot instead of the disk (workers, reload). */
  readFile?: (file: string) => string;
  /** Called once the configuration is read and applied, before initConf (`-t` prints "syntax is ok" here). */
  onSyntaxOk?: () => void;
  /** Receives the `[warn]` lines of reading (leave unset where the master already reported them). */
  onWarning?: ConfWarningSink;
}

export class Cycle {
  readonly registry: Registry;
  readonly paths: ConfPaths;
  readonly main = new Level();
  readonly files: ConfFile[];
  readonly listeners = new Map<string, ListenSpec>();
  /** Log files the configuration writes, in the order their directives were read (nginx's open_files); `-t` opens each. */
  readonly openFiles: string[] = [];
  readonly options: CycleOptions;

  private constructor(registry: Registry, options: CycleOptions, files: ConfFile[]) {
    this.registry = registry;
    this.paths = options.paths;
    this.options = options;
    this.files = files;
  }

  /** Reads, applies and initializes a configuration; throws ConfError. */
  static load(modules: ModuleBase[], options: CycleOptions): Cycle {
    const registry = new Registry(modules);
    const parsed = parseConfig(options.paths.confFile, options.globals, {
      confPrefix: options.paths.confPrefix,
      readFile: options.readFile,
    });
    const cycle = new Cycle(registry, options, parsed.files);
    const cf = new ConfContext(registry, options.paths, Ctx.MAIN, cycle.main, { main: cycle.main }, { cycle }, options.onWarning);
    applyBlock(cf, parsed.nodes);
    if (parsed.error) throw parsed.error;
    // the built-in modules and those load_module added
    const all = registry.modules as CycleModule[];
    for (const m of all) m.initCycle?.(cycle);
    options.onSyntaxOk?.();
    for (const m of all) m.initConf?.(cycle);
    return cycle;
  }

  addListener(spec: ListenSpec): ListenSpec {
    const have = this.listeners.get(spec.key);
    if (have) {
      if (have.protocol !== spec.protocol) throw new ConfError(`duplicate listen ${spec.key}`);
      return have;
    }
    this.listeners.set(spec.key, spec);
    return spec;
  }

  /** Registers a log file a directive names (ngx_conf_open_file), once per path. */
  registerOpenFile(file: string): void {
    if (!this.openFiles.includes(file)) this.openFiles.push(file);
  }

  /** The cycle being configured, from a directive handler's context. */
  static of(cf: ConfContext): Cycle {
    return cf.data.cycle as Cycle;
  }

  /** Files besides the configuration that directives read (not printed by -T). */
  private readonly auxiliary = new Map<string, string>();

  /**
   * Reads a file a directive names (ssl_password_file) once for every
   * worker: it goes into the snapshot, so a FIFO is read by the master only.
   */
  readAuxiliary(file: string): string {
    let text = this.auxiliary.get(file);
    if (text === undefined) {
      text = this.options.readFile ? this.options.readFile(file) : fs.readFileSync(file, 'latin1');
      this.auxiliary.set(file, text);
    }
    return text;
  }

  /** The file contents read, to hand to workers so they load exactly what the master checked. */
  snapshot(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const f of this.files) out[f.name] = f.text;
    for (const [name, text] of this.auxiliary) out[name] = text;
    return out;
  }
}

/** Resolves nginx's -p and -c into the paths a cycle needs, joined as nginx joins them (no `..` folding). */
export function resolvePaths(prefix: string, confFile: string): ConfPaths {
  const p = prefix.endsWith('/') ? prefix : prefix + '/';
  const file = fullName(p, confFile);
  return { prefix: p, confPrefix: file.slice(0, file.lastIndexOf('/') + 1), confFile: file };
}

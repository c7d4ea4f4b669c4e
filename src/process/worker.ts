/**
 * A worker thread: owns its listening sockets (SO_REUSEPORT, one accept queue
 * per worker) and serves the current configuration. A reload replaces the
 * configuration inside the worker — listeners for unchanged addresses stay
 * open, so no connection waiting in an accept queue is ever reset — while
 * connections of the old configuration finish and close.
 */
import net from 'node:net';
import dgram from 'node:dgram';
import fs from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { Cycle } from '../core/cycle.ts';
import type { ConnectionHandler, CycleModule, DatagramHandler, ListenSpec, WorkerRuntime } from '../core/cycle.ts';
import type { ConfPaths } from '../conf/context.ts';
import { ErrorLog, setMainErrorLog } from '../core/error-log.ts';
import { reopenAll } from '../core/reopen.ts';
import { coreSettings } from '../core/modules/core.ts';
import { openCycleLog } from '../core/cycle-log.ts';
import { adoptSharedZones, useSharedCounters } from '../core/shared.ts';
import { modules } from '../modules.ts';
import { ConfError, sysErrorText } from '../conf/errors.ts';
import type { MasterMessage, ProcessRole, WorkerMessage, WorkerStart } from '../core/messages.ts';

/** One loaded configuration serving in this worker. */
class Generation implements WorkerRuntime {
  readonly cycle: Cycle;
  readonly handlers = new Map<string, ConnectionHandler>();
  readonly datagramHandlers = new Map<string, DatagramHandler>();
  readonly sockets = new Set<net.Socket>();
  private readonly shutdownHooks: Array<(graceful: boolean) => void> = [];
  readonly workerId: number;
  readonly role: ProcessRole;
  readonly log: ErrorLog;
  /** A module of this cycle asked for a privileged agent (the master is told with ready/prepared). */
  wantsAgent = false;
  private drained: Promise<void> | undefined;
  private onDrained: (() => void) | undefined;
  private readonly timers: NodeJS.Timeout[] = [];
  /** Work a graceful shutdown waits for besides the connections (holdShutdown). */
  private held = 0;

  constructor(cycle: Cycle, workerId: number, role: ProcessRole, log: ErrorLog) {
    this.cycle = cycle;
    this.workerId = workerId;
    this.role = role;
    this.log = log;
  }

  requestPrivilegedAgent(): void {
    this.wantsAgent = true;
  }

  exitGracefully(): void {
    // as a QUIT from the master would; the master, which did not ask, starts a new worker
    queue = queue.then(() => stop('quit'));
  }

  onConnection(key: string, handler: ConnectionHandler): void {
    this.handlers.set(key, handler);
  }

  connectionHandler(key: string): ConnectionHandler | undefined {
    return this.handlers.get(key);
  }

  onDatagram(key: string, handler: DatagramHandler): void {
    this.datagramHandlers.set(key, handler);
  }

  onShutdown(fn: (graceful: boolean) => void): void {
    this.shutdownHooks.push(fn);
  }

  holdShutdown(work: Promise<unknown>): void {
    this.held++;
    const done = () => {
      this.held--;
      this.checkDrained();
    };
    work.then(done, done);
  }

  /** The drain is over once no connection is open and no held work is pending. */
  private checkDrained(): void {
    if (this.sockets.size === 0 && this.held === 0) this.onDrained?.();
  }

  private readonly closeHooks: Array<() => void> = [];

  onClose(fn: () => void): void {
    this.closeHooks.push(fn);
  }

  /** The generation is done (drained, or never committed): modules release their files, then its error log closes. */
  close(): void {
    this.release();
    this.log.close();
  }

  /** The modules release what they hold (their close hooks, once), the error log staying open. */
  release(): void {
    for (const fn of this.closeHooks.splice(0)) fn();
  }

  accept(key: string, socket: net.Socket): void {
    const h = this.handlers.get(key);
    if (!h) { socket.destroy(); return; }
    this.sockets.add(socket);
    socket.on('close', () => {
      this.sockets.delete(socket);
      this.checkDrained();
    });
    h(socket);
  }

  /**
   * Stops serving gracefully: in-flight requests finish, idle connections
   * close. Resolves when the last connection closed; `timeoutMs` (> 0) then
   * closes whatever is left (worker_shutdown_timeout). May be called again
   * (QUIT during a reload's drain) to add a deadline.
   */
  shutdown(timeoutMs: number): Promise<void> {
    if (!this.drained) {
      this.drained = new Promise((resolve) => {
        this.onDrained = () => {
          for (const t of this.timers) clearTimeout(t);
          resolve();
        };
      });
      for (const fn of this.shutdownHooks) fn(true);
      this.checkDrained();
    }
    if (timeoutMs > 0) this.timers.push(setTimeout(() => this.destroy(), timeoutMs));
    return this.drained;
  }

  /** Closes every connection now. */
  destroy(): void {
    for (const fn of this.shutdownHooks) fn(false);
    for (const s of this.sockets) s.destroy();
  }
}

const start = workerData as WorkerStart;
const workerId = start.workerId;
useSharedCounters(start.counters);
adoptSharedZones(start.zones);

/** A listening socket: TCP or unix (a server), or UDP. */
type Listener = net.Server | dgram.Socket;

const listeners = new Map<string, Listener>();
let current: Generation | undefined;
/** The current generation and older ones still finishing their connections. */
const live = new Set<Generation>();
let pending: Generation | undefined;
/** Listeners opened for a pending reload, closed again if it is aborted. */
let pendingNew: string[] = [];

function post(msg: WorkerMessage): void {
  parentPort!.postMessage(msg);
}

function errorText(err: unknown): string {
  return err instanceof ConfError ? err.text : String((err as Error)?.stack ?? err);
}

/** Loads the configuration the master checked (the same file snapshot) and runs its modules' worker hooks. */
async function loadGeneration(snapshot: Record<string, string>, paths: ConfPaths, globals: string | undefined): Promise<Generation> {
  const cycle = Cycle.load(modules, {
    paths,
    globals,
    readFile(file) {
      if (file in snapshot) return snapshot[file];
      return fs.readFileSync(file, 'latin1');
    },
  });
  const gen = new Generation(cycle, workerId, start.role, openCycleLog(cycle, start.defaultErrorLog));
  // what the worker hooks log (init_worker_by_lua's ngx.log) goes to the new configuration's error log
  setMainErrorLog(gen.log);
  try {
    for (const m of cycle.registry.modules as CycleModule[]) await m.initWorker?.(cycle, gen);
  } catch (err) {
    if (current) setMainErrorLog(current.log);
    gen.destroy();
    gen.close();
    throw err;
  }
  return gen;
}

/** Whether this worker binds `spec` (unix sockets can only be bound once, by worker 0; the privileged agent binds none). */
function bindsHere(spec: ListenSpec): boolean {
  if (start.role !== 'worker') return false;
  return spec.path === undefined || workerId === 0;
}

/** A UDP listener (SO_REUSEPORT: the kernel sends each client's datagrams to one worker's socket). */
function listenUdp(spec: ListenSpec): Promise<dgram.Socket> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket({ type: spec.host!.includes(':') ? 'udp6' : 'udp4', reuseAddr: true, reusePort: true, ipv6Only: spec.ipv6only });
    socket.on('message', (msg, from) => current?.datagramHandlers.get(spec.key)?.(msg, from, socket));
    socket.once('error', reject);
    socket.bind({ address: spec.host, port: spec.port }, () => {
      socket.off('error', reject);
      socket.on('error', (e) => current?.log.error(`recvmsg() failed ${sysErrorText(e)}`));
      resolve(socket);
    });
  });
}

function listen(spec: ListenSpec): Promise<Listener> {
  if (spec.udp) return listenUdp(spec);
  return new Promise((resolve, reject) => {
    const server = net.createServer({ pauseOnConnect: false, noDelay: true });
    server.on('connection', (socket) => {
      const gen = current;
      if (!gen) { socket.destroy(); return; }
      if (spec.keepalive) socket.setKeepAlive(true, spec.keepaliveInitialDelayMs ?? 0);
      gen.accept(spec.key, socket);
    });
    server.once('error', reject);
    const done = () => {
      server.off('error', reject);
      server.on('error', (e) => current?.log.error(`accept() failed ${sysErrorText(e)}`));
      resolve(server);
    };
    if (spec.path !== undefined) {
      try { fs.unlinkSync(spec.path); } catch { /* not there */ }
      server.listen({ path: spec.path, backlog: spec.backlog ?? 511 }, done);
    } else {
      server.listen({ host: spec.host, port: spec.port, backlog: spec.backlog ?? 511, reusePort: true, ipv6Only: spec.ipv6only ?? spec.host?.includes(':') }, done);
    }
  });
}

/** Opens listeners the generation needs that are not open yet; returns their keys. */
async function openListeners(gen: Generation): Promise<string[]> {
  const opened: string[] = [];
  for (const spec of gen.cycle.listeners.values()) {
    if (listeners.has(spec.key) || !bindsHere(spec)) continue;
    try {
      listeners.set(spec.key, await listen(spec));
      opened.push(spec.key);
    } catch (err) {
      closeListeners(opened);
      throw new ConfError(`bind() to ${spec.key} failed ${sysErrorText(err)}`);
    }
  }
  return opened;
}

function closeListeners(keys: Iterable<string>): void {
  for (const k of [...keys]) {
    listeners.get(k)?.close();
    listeners.delete(k);
  }
}

/** Switches new connections to `gen`; the previous generation drains. */
function commit(gen: Generation): void {
  const old = current;
  current = gen;
  live.add(gen);
  setMainErrorLog(gen.log);
  closeListeners([...listeners.keys()].filter((k) => !gen.cycle.listeners.has(k)));
  if (!old) return;
  old.log.notice('gracefully shutting down');
  void old.shutdown(coreSettings(old.cycle).workerShutdownTimeout).then(() => {
    live.delete(old);
    old.close();
  });
}

/** The environment of the configuration being served (restored when a reload is dropped). */
let committedEnv = { ...process.env } as Record<string, string>;

/** Replaces this thread's environment (nginx's `env` directive; the master computes it). */
function setEnv(env: Record<string, string>): void {
  for (const k of Object.keys(process.env)) if (!(k in env)) delete process.env[k];
  Object.assign(process.env, env);
}

function dropPending(): void {
  setEnv(committedEnv);
  closeListeners(pendingNew);
  pendingNew = [];
  if (pending) {
    pending.destroy();
    pending.close();
    pending = undefined;
  }
}

async function stop(how: 'quit' | 'stop'): Promise<never> {
  dropPending();
  closeListeners([...listeners.keys()]);
  const log = current?.log;
  if (how === 'quit') {
    log?.notice('gracefully shutting down');
    const timeout = current ? coreSettings(current.cycle).workerShutdownTimeout : 0;
    await Promise.all([...live].map((g) => g.shutdown(timeout)));
  } else {
    for (const g of live) g.destroy();
  }
  log?.notice('exiting');
  // nginx's exit_process hooks (exit_worker_by_lua) run before its last "exit"
  for (const g of live) g.release();
  log?.notice('exit');
  process.exit(0);
}

async function handle(msg: MasterMessage): Promise<void> {
  switch (msg.type) {
    case 'reload':
      try {
        dropPending();
        adoptSharedZones(msg.zones);
        // before the modules' worker hooks run, as a new nginx worker has it
        setEnv(msg.env);
        const gen = await loadGeneration(msg.snapshot, msg.paths, msg.globals);
        pending = gen;
        pendingNew = await openListeners(gen);
        post({ type: 'prepared', agent: gen.wantsAgent });
      } catch (err) {
        dropPending();
        post({ type: 'failed', error: errorText(err), level: err instanceof ConfError ? err.level : undefined });
      }
      return;
    case 'commit':
      if (!pending) return;
      committedEnv = { ...process.env } as Record<string, string>;
      pendingNew = [];
      commit(pending);
      pending = undefined;
      return;
    case 'abort':
      dropPending();
      return;
    case 'reopen':
      current?.log.notice('reopening logs');
      reopenAll();
      return;
    case 'quit':
    case 'stop':
      return stop(msg.type);
    case 'crash':
      if (msg.how === 'exit') process.exit(70);
      // thrown from a timer, like a bug in a callback: nothing catches it
      setTimeout(() => { throw new Error('worker crash requested by GATEHOUSE_TEST_CRASH'); });
      return;
  }
}

/** Reloads run one at a time; a stop must not wait behind one. */
let queue: Promise<void> = Promise.resolve();

async function main(): Promise<void> {
  try {
    const gen = await loadGeneration(start.snapshot, start.paths, start.globals);
    try {
      await openListeners(gen);
    } catch (err) {
      gen.destroy();
      throw err;
    }
    commit(gen);
    parentPort!.on('message', (m: MasterMessage) => {
      if (m.type === 'stop' || m.type === 'reopen' || m.type === 'crash') void handle(m);
      else queue = queue.then(() => handle(m));
    });
    post({ type: 'ready', agent: gen.wantsAgent });
  } catch (err) {
    post({ type: 'failed', error: errorText(err), level: err instanceof ConfError ? err.level : undefined });
  }
}

void main();

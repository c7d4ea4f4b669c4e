/**
 * A worker thread: owns its listening sockets (SO_REUSEPORT, one accept queue
 * per worker) and serves the current configuration. A reload replaces the
 * configuration inside the worker — listeners for unchanged addresses stay
 * open, so no connection waiting in an accept queue is ever reset — while
 * connections of the old configuration finish and close.
 */
import net from 'node:net';
import fs from 'node:fs';
import { parentPort, threadId, workerData } from 'node:worker_threads';
import { Cycle } from './cycle.ts';
import type { ConnectionHandler, CycleModule, ListenSpec, WorkerRuntime } from './cycle.ts';
import type { ConfPaths } from '../conf/context.ts';
import { ErrorLog, LogLevel, setMainErrorLog } from './error-log.ts';
import { reopenAll } from './reopen.ts';
import { coreSettings } from './modules/core.ts';
import { useSharedCounters } from './shared.ts';
import { modules } from '../modules.ts';
import { ConfError, sysErrorText } from '../conf/errors.ts';
import type { MasterMessage, WorkerMessage, WorkerStart } from './messages.ts';

/** One loaded configuration serving in this worker. */
class Generation implements WorkerRuntime {
  readonly cycle: Cycle;
  readonly handlers = new Map<string, ConnectionHandler>();
  readonly sockets = new Set<net.Socket>();
  private readonly shutdownHooks: Array<(graceful: boolean) => void> = [];
  readonly workerId: number;
  readonly log: ErrorLog;

  constructor(cycle: Cycle, workerId: number, log: ErrorLog) {
    this.cycle = cycle;
    this.workerId = workerId;
    this.log = log;
  }

  onConnection(key: string, handler: ConnectionHandler): void {
    this.handlers.set(key, handler);
  }

  onShutdown(fn: (graceful: boolean) => void): void {
    this.shutdownHooks.push(fn);
  }

  accept(key: string, socket: net.Socket): void {
    const h = this.handlers.get(key);
    if (!h) { socket.destroy(); return; }
    this.sockets.add(socket);
    socket.once('close', () => {
      this.sockets.delete(socket);
      if (this.sockets.size === 0) this.onDrained?.();
    });
    h(socket);
  }

  onDrained: (() => void) | undefined;

  /** Stops this generation; resolves when its last connection closed. */
  shutdown(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => { clearTimeout(timer); resolve(); };
      this.onDrained = done;
      for (const fn of this.shutdownHooks) fn(true);
      const timer = timeoutMs > 0 ? setTimeout(() => {
        for (const fn of this.shutdownHooks) fn(false);
        for (const s of this.sockets) s.destroy();
      }, timeoutMs) : undefined;
      if (this.sockets.size === 0) done();
    });
  }

  destroy(): void {
    for (const fn of this.shutdownHooks) fn(false);
    for (const s of this.sockets) s.destroy();
  }
}

const start = workerData as WorkerStart;
const workerId = start.workerId;
useSharedCounters(start.counters);

const listeners = new Map<string, net.Server>();
let current: Generation | undefined;
let pending: Generation | undefined;
/** Listeners opened for a pending reload, closed again if it is aborted. */
let pendingNew: string[] = [];

function post(msg: WorkerMessage): void {
  parentPort!.postMessage(msg);
}

function loadGeneration(snapshot: Record<string, string>, paths: ConfPaths, globals: string | undefined): Generation {
  const cycle = Cycle.load(modules, {
    paths,
    globals,
    readFile(file) {
      if (file in snapshot) return snapshot[file];
      return fs.readFileSync(file, 'latin1');
    },
  });
  const core = coreSettings(cycle);
  const specs = core.errorLogs.length ? core.errorLogs : [{ file: start.defaultErrorLog, level: LogLevel.error }];
  const log = new ErrorLog(specs);
  return new Generation(cycle, workerId, log);
}

/** Whether this worker binds `spec` (unix sockets can only be bound once, by worker 0). */
function bindsHere(spec: ListenSpec): boolean {
  return spec.path === undefined || workerId === 0;
}

function listen(spec: ListenSpec): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer({ pauseOnConnect: false, noDelay: true });
    server.on('connection', (socket) => {
      const gen = current;
      if (!gen) { socket.destroy(); return; }
      if (spec.keepalive) socket.setKeepAlive(true, spec.keepaliveInitialDelayMs ?? 0);
      gen.accept(spec.key, socket);
    });
    server.once('error', reject);
    const done = () => { server.off('error', reject); server.on('error', (e) => current?.log.error(`accept() failed ${sysErrorText(e)}`)); resolve(server); };
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
      for (const k of opened) { listeners.get(k)?.close(); listeners.delete(k); }
      throw new ConfError(`bind() to ${spec.key} failed ${sysErrorText(err)}`);
    }
  }
  return opened;
}

/** Closes listeners the current generation no longer uses. */
function closeUnused(gen: Generation): void {
  for (const [key, server] of listeners) {
    if (!gen.cycle.listeners.has(key)) {
      server.close();
      listeners.delete(key);
    }
  }
}

async function startGeneration(gen: Generation): Promise<void> {
  setMainErrorLog(gen.log);
  for (const m of modules as CycleModule[]) await m.initWorker?.(gen.cycle, gen);
}

async function handle(msg: MasterMessage): Promise<void> {
  switch (msg.type) {
    case 'reload': {
      try {
        const gen = loadGeneration(msg.snapshot, msg.paths, msg.globals);
        pendingNew = await openListeners(gen);
        pending = gen;
        post({ type: 'prepared' });
      } catch (err) {
        post({ type: 'failed', error: err instanceof ConfError ? err.text : String((err as Error).stack ?? err) });
      }
      return;
    }
    case 'commit': {
      const old = current;
      const gen = pending!;
      pending = undefined;
      await startGeneration(gen);
      current = gen;
      closeUnused(gen);
      if (old) {
        old.log.notice('gracefully shutting down');
        void old.shutdown(coreSettings(old.cycle).workerShutdownTimeout).then(() => old.log.close());
      }
      return;
    }
    case 'abort': {
      for (const k of pendingNew) { listeners.get(k)?.close(); listeners.delete(k); }
      pendingNew = [];
      pending = undefined;
      return;
    }
    case 'reopen': {
      reopenAll();
      return;
    }
    case 'quit':
    case 'stop': {
      for (const s of listeners.values()) s.close();
      listeners.clear();
      const gen = current;
      if (!gen) process.exit(0);
      if (msg.type === 'quit') {
        gen.log.notice('gracefully shutting down');
        await gen.shutdown(coreSettings(gen.cycle).workerShutdownTimeout);
      } else {
        gen.destroy();
      }
      gen.log.notice('exiting');
      process.exit(0);
    }
  }
}

async function main(): Promise<void> {
  try {
    const gen = loadGeneration(start.snapshot, start.paths, start.globals);
    await openListeners(gen);
    await startGeneration(gen);
    current = gen;
    parentPort!.on('message', (m: MasterMessage) => { void handle(m); });
    post({ type: 'ready', threadId });
  } catch (err) {
    post({ type: 'failed', error: err instanceof ConfError ? err.text : String((err as Error).stack ?? err) });
  }
}

void main();

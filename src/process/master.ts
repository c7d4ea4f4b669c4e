/**
 * The master (main thread): checks that the listening addresses are free,
 * starts `worker_processes` worker threads, writes the pid file once they
 * listen, and handles nginx's signals — HUP reloads (a bad configuration is
 * logged and the old one keeps serving), USR1 reopens logs, QUIT stops
 * gracefully, TERM/INT stop fast. A worker that dies is replaced.
 */
import fs from 'node:fs';
import os from 'node:os';
import { Cycle } from '../core/cycle.ts';
import type { CycleOptions, ListenSpec } from '../core/cycle.ts';
import { ErrorLog, LogLevel, setMainErrorLog } from '../core/error-log.ts';
import { openCycleLog } from '../core/cycle-log.ts';
import { BindFailed, checkBindable } from '../core/bind-check.ts';
import { coreSettings } from '../core/modules/core.ts';
import { allSharedZones, createSharedCounters } from '../core/shared.ts';
import type { MasterMessage, ProcessRole, WorkerMessage, WorkerStart } from '../core/messages.ts';
import { modules } from '../modules.ts';
import { ConfError, sysErrorText } from '../conf/errors.ts';
import { reopenAll } from '../core/reopen.ts';
import { oneLine, spawnWorker, workerEnv } from './worker-thread.ts';
import type { WorkerSlot } from './worker-thread.ts';

/** A worker that dies this soon after starting is respawned after a pause, not in a tight loop. */
const RESPAWN_PAUSE_MS = 1000;
/** TERM: workers still running after this are terminated. */
const FAST_STOP_MS = 1000;

export interface MasterOptions extends CycleOptions {
  /** The error log before the configuration names one (-e, or logs/error.log). */
  defaultErrorLog: string;
  /** Lines logged at notice level when the master starts (version, OS). */
  banner?: string[];
  /** Called once workers listen and the pid file is written, or with the error that stopped the start. */
  onReady?: (error?: string) => void;
}

type Reply = WorkerMessage | { type: 'gone' };

export class Master {
  private cycle: Cycle;
  private readonly opts: MasterOptions;
  private log: ErrorLog;
  private readonly workers: WorkerSlot[] = [];
  private readonly counters = createSharedCounters();
  private state: 'starting' | 'running' | 'stopping' = 'starting';
  /** Signals that arrived while starting, acted on once started. */
  private deferred: Array<() => void> = [];
  /** Reloads and respawns run one at a time, so a respawned worker always gets the current configuration. */
  private queue: Promise<void> = Promise.resolve();
  private pidFile = '';
  /** The running configuration asked for OpenResty's privileged agent (ngx.process). */
  private agentWanted = false;

  /** Throws ConfError when the configuration's error log cannot be opened. */
  constructor(cycle: Cycle, opts: MasterOptions) {
    this.cycle = cycle;
    this.opts = opts;
    this.log = openCycleLog(cycle, opts.defaultErrorLog);
    // like nginx, messages go to stderr too until the server runs
    this.log.useStderr = true;
    setMainErrorLog(this.log);
  }

  private workerCount(cycle: Cycle): number {
    const core = coreSettings(cycle);
    return core.masterProcess ? core.workerProcesses : 1;
  }

  /** Starts the server; false (with everything logged and nothing left running) if it could not. */
  async run(): Promise<boolean> {
    this.installSignals();
    for (const line of this.opts.banner ?? []) this.log.notice(line);
    try {
      await checkBindable(this.cycle.listeners.values(), this.log);
      this.log.notice('start worker processes');
      const count = this.workerCount(this.cycle);
      const started = await Promise.allSettled(Array.from({ length: count }, (_, i) => this.start(i, this.cycle)));
      for (const r of started) if (r.status === 'fulfilled') this.workers.push(r.value);
      const failed = started.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
      this.agentWanted = this.workers.some((w) => w.agentWanted);
      if (this.agentWanted) this.workers.push(await this.start(-1, this.cycle, 'privileged agent'));
      this.writePid(coreSettings(this.cycle).pid);
    } catch (err) {
      for (const w of this.workers) { w.retiring = true; void w.worker.terminate(); }
      const text = err instanceof BindFailed ? err.message : describeStartError(err);
      // a configuration error at its own level (init_by_lua's are [error], as in OpenResty)
      const level = err instanceof ConfError ? LogLevel[err.level as keyof typeof LogLevel] ?? LogLevel.emerg : LogLevel.emerg;
      if (!(err instanceof BindFailed)) this.log.log(level, text);
      this.opts.onReady?.(text);
      return false;
    }
    this.state = 'running';
    this.log.useStderr = false;
    // a bug in the master must not take the workers (and every connection) down with it
    process.on('uncaughtException', (err) => this.log.alert(`master: ${oneLine(err)}`));
    process.on('unhandledRejection', (err) => this.log.alert(`master: ${oneLine(err)}`));
    this.opts.onReady?.();
    for (const fn of this.deferred.splice(0)) fn();
    return true;
  }

  private start(id: number, cycle: Cycle, role: ProcessRole = 'worker'): Promise<WorkerSlot> {
    const data: WorkerStart = {
      workerId: id,
      role,
      snapshot: cycle.snapshot(),
      paths: cycle.paths,
      globals: this.opts.globals,
      defaultErrorLog: this.opts.defaultErrorLog,
      counters: this.counters,
      zones: allSharedZones(),
      env: workerEnv(cycle),
    };
    return spawnWorker(id, data).then((s) => {
      // (the privileged agent's line as OpenResty's nginx patch logs it)
      this.log.notice(`start ${role === 'worker' ? 'worker' : 'privileged agent'} process ${s.tid}`);
      s.worker.on('exit', (code) => this.onWorkerExit(s, code));
      return s;
    });
  }

  private writePid(file: string): void {
    if (file) {
      try {
        fs.writeFileSync(file, `${process.pid}\n`);
      } catch (err) {
        throw new ConfError(`open() "${file}" failed ${sysErrorText(err)}`);
      }
    }
    this.pidFile = file;
  }

  private removePid(): void {
    if (!this.pidFile) return;
    try {
      if (fs.readFileSync(this.pidFile, 'latin1').trim() === String(process.pid)) fs.unlinkSync(this.pidFile);
    } catch { /* already gone */ }
  }

  private installSignals(): void {
    const on = (sig: NodeJS.Signals, num: number, action: string, fn: () => void) => {
      process.on(sig, () => {
        this.log.notice(`signal ${num} (${sig}) received, ${action}`);
        if (this.state === 'starting') this.deferred.push(fn);
        else fn();
      });
    };
    on('SIGHUP', 1, 'reconfiguring', () => { void this.reload(); });
    on('SIGUSR1', 10, 'reopening logs', () => this.reopen());
    on('SIGQUIT', 3, 'shutting down', () => this.shutdown('quit'));
    on('SIGTERM', 15, 'exiting', () => this.shutdown('stop'));
    on('SIGINT', 2, 'exiting', () => this.shutdown('stop'));
    // nginx's binary upgrade (USR2) and WINCH have no meaning for threads
    on('SIGUSR2', 12, 'ignoring', () => this.testCrash());
    on('SIGWINCH', 28, 'ignoring', () => undefined);
    process.on('SIGPIPE', () => undefined);
  }

  /**
   * Test hook: with GATEHOUSE_TEST_CRASH=throw|exit in the master's
   * environment at start, USR2 makes worker 0 die (an uncaught exception, or
   * process.exit in the thread) so tests can check that it is replaced.
   * Only whoever starts the server and may signal it can use it; without the
   * variable USR2 is ignored.
   */
  private testCrash(): void {
    const how = process.env.GATEHOUSE_TEST_CRASH;
    if (how !== 'throw' && how !== 'exit') return;
    const w = this.workers.find((s) => !s.retiring && s.id === 0 && s.role === 'worker');
    w?.worker.postMessage({ type: 'crash', how } satisfies MasterMessage);
  }

  private broadcast(msg: MasterMessage): void {
    for (const w of this.workers) w.worker.postMessage(msg);
  }

  private reopen(): void {
    if (this.state === 'stopping') return;
    this.log.notice('reopening logs');
    reopenAll();
    this.broadcast({ type: 'reopen' });
  }

  /** Runs `task` after the reloads and respawns before it. */
  private enqueue(task: () => Promise<void>): Promise<void> {
    const next = this.queue.then(task).catch((err) => this.log.alert(`${oneLine(err)}`));
    this.queue = next;
    return next;
  }

  /** HUP: load the configuration again; only a good one replaces the running one. */
  reload(): Promise<void> {
    return this.enqueue(() => this.doReload());
  }

  private async doReload(): Promise<void> {
    if (this.state !== 'running') return;
    this.log.notice('reconfiguring');
    let cycle: Cycle;
    let log: ErrorLog;
    try {
      cycle = Cycle.load(modules, { paths: this.cycle.paths, globals: this.opts.globals, onWarning: (w) => this.log.log(w.level === 'alert' ? LogLevel.alert : LogLevel.warn, w.text) });
      log = openCycleLog(cycle, this.opts.defaultErrorLog);
    } catch (err) {
      if (!(err instanceof ConfError)) throw err;
      this.log.emerg(err.text);
      return;
    }
    const ok = await this.switchTo(cycle).catch((err) => {
      if (!(err instanceof BindFailed)) throw err;
      return false;
    });
    if (!ok) { log.close(); return; }

    const oldLog = this.log;
    this.log = log;
    setMainErrorLog(log);
    oldLog.close();
    const oldPid = this.pidFile;
    const newPid = coreSettings(cycle).pid;
    if (newPid !== oldPid) {
      try {
        this.writePid(newPid);
        if (oldPid) fs.rmSync(oldPid, { force: true });
      } catch (err) {
        this.log.emerg(describeStartError(err));
      }
    }
    await this.resize(cycle);
  }

  /** Has every worker prepare `cycle`, then commit it; false (nothing changed) if any worker could not. */
  private async switchTo(cycle: Cycle): Promise<boolean> {
    // addresses new to the configuration must be free; ports our workers
    // already hold are skipped (a plain bind would see our own sockets)
    const ownPorts = new Set([...this.cycle.listeners.values()].map((s) => s.port));
    const added = [...cycle.listeners.values()].filter((s) => !this.cycle.listeners.has(s.key));
    await checkBindable(added, this.log, (s: ListenSpec) => ownPorts.has(s.port));

    const active = this.workers.filter((w) => !w.retiring);
    const msg: MasterMessage = {
      type: 'reload', snapshot: cycle.snapshot(), paths: cycle.paths, globals: this.opts.globals, zones: allSharedZones(), env: workerEnv(cycle),
    };
    const replies = await Promise.all(active.map((w) => this.ask(w, msg)));
    const prepared = active.filter((_, i) => replies[i].type === 'prepared');
    const failed = replies.find((m) => m.type === 'failed');
    if (failed?.type === 'failed' || this.state !== 'running') {
      for (const w of prepared) w.worker.postMessage({ type: 'abort' } satisfies MasterMessage);
      if (failed?.type === 'failed') this.log.emerg(failed.error);
      return false;
    }
    for (const w of prepared) w.worker.postMessage({ type: 'commit' } satisfies MasterMessage);
    this.agentWanted = replies.some((m) => m.type === 'prepared' && m.agent);
    // a worker that died while preparing is respawned (queued after us) with the new configuration
    this.cycle = cycle;
    return true;
  }

  /** worker_processes changed: start the missing workers, retire the extra ones; the same for the privileged agent. */
  private async resize(cycle: Cycle): Promise<void> {
    const agent = this.workers.find((w) => !w.retiring && w.role !== 'worker');
    if (agent && !this.agentWanted) this.retire(agent, 'quit');
    if (!agent && this.agentWanted) await this.startLate(-1, 'privileged agent');
    const want = this.workerCount(cycle);
    const active = this.workers.filter((w) => !w.retiring && w.role === 'worker').sort((a, b) => a.id - b.id);
    for (const w of active.slice(want)) this.retire(w, 'quit');
    const used = new Set(active.slice(0, want).map((w) => w.id));
    for (let id = 0; used.size < want; id++) {
      if (used.has(id)) continue;
      used.add(id);
      await this.startLate(id);
    }
  }

  /** Starts a worker after startup (resize, respawn); failures are logged. */
  private async startLate(id: number, role: ProcessRole = 'worker'): Promise<void> {
    if (this.state !== 'running') return;
    try {
      this.workers.push(await this.start(id, this.cycle, role));
    } catch (err) {
      this.log.alert(`could not start worker process: ${describeStartError(err)}`);
    }
  }

  private ask(w: WorkerSlot, msg: MasterMessage): Promise<Reply> {
    return new Promise((resolve) => {
      const done = (m: Reply) => {
        w.worker.off('message', onMessage);
        w.worker.off('exit', onExit);
        resolve(m);
      };
      const onMessage = (m: WorkerMessage) => { if (m.type === 'prepared' || m.type === 'failed') done(m); };
      const onExit = () => done({ type: 'gone' });
      w.worker.on('message', onMessage);
      w.worker.on('exit', onExit);
      w.worker.postMessage(msg);
    });
  }

  private retire(w: WorkerSlot, how: 'quit' | 'stop'): void {
    w.retiring = true;
    w.worker.postMessage({ type: how } satisfies MasterMessage);
  }

  private onWorkerExit(w: WorkerSlot, code: number): void {
    const i = this.workers.indexOf(w);
    if (i >= 0) this.workers.splice(i, 1);
    const crashed = !w.retiring && (code !== 0 || w.failure !== undefined);
    if (w.failure) this.log.alert(`worker process ${w.tid} failed: ${w.failure}`);
    if (crashed) this.log.alert(`worker process ${w.tid} exited with code ${code}`);
    else this.log.notice(`worker process ${w.tid} exited with code ${code}`);
    if (this.state === 'stopping') {
      if (this.workers.length === 0) this.exit();
      return;
    }
    if (w.retiring) return;
    const pause = Math.max(0, w.startedAt + RESPAWN_PAUSE_MS - Date.now());
    void this.enqueue(async () => {
      if (pause) await new Promise((r) => setTimeout(r, pause));
      await this.startLate(w.id, w.role);
    });
  }

  private shutdown(how: 'quit' | 'stop'): void {
    if (this.state === 'stopping' && how === 'quit') return;
    this.state = 'stopping';
    if (this.workers.length === 0) return this.exit();
    for (const w of this.workers) this.retire(w, how);
    if (how === 'stop') {
      setTimeout(() => { for (const w of this.workers) void w.worker.terminate(); }, FAST_STOP_MS).unref();
    }
  }

  private exit(): void {
    this.removePid();
    this.log.notice('exit');
    process.exit(0);
  }
}

/** Notice lines nginx logs when it starts. */
export function startBanner(version: string): string[] {
  return [version, `built by node ${process.version}`, `OS: ${os.type()} ${os.release()}`];
}

export function describeStartError(err: unknown): string {
  if (err instanceof ConfError) return err.text;
  const e = err as NodeJS.ErrnoException;
  return e?.code ? `${e.message} ${sysErrorText(e)}` : oneLine(e);
}

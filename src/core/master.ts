/**
 * The master (main thread): starts `worker_processes` worker threads, writes
 * the pid file once they listen, and handles nginx's signals — HUP reloads
 * (a bad configuration is logged and the old one keeps serving), USR1
 * reopens logs, QUIT stops gracefully, TERM/INT stop fast. A worker that dies
 * is replaced.
 */
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import { Cycle } from './cycle.ts';
import type { CycleOptions } from './cycle.ts';
import { ErrorLog, LogLevel, setMainErrorLog } from './error-log.ts';
import { coreSettings } from './modules/core.ts';
import { createSharedCounters } from './shared.ts';
import type { MasterMessage, WorkerMessage, WorkerStart } from './messages.ts';
import { modules } from '../modules.ts';
import { ConfError, sysErrorText } from '../conf/errors.ts';
import { reopenAll } from './reopen.ts';

const WORKER_URL = new URL('./worker.ts', import.meta.url);

interface WorkerSlot {
  id: number;
  worker: Worker;
  /** Set while the master is stopping this worker on purpose. */
  retiring: boolean;
}

export interface MasterOptions extends CycleOptions {
  /** The error log before the configuration names one (-e, or logs/error.log). */
  defaultErrorLog: string;
  /** Called once workers listen (daemon readiness). */
  onReady?: () => void;
}

export class Master {
  private cycle: Cycle;
  private readonly opts: MasterOptions;
  private log: ErrorLog;
  private readonly workers: WorkerSlot[] = [];
  private readonly counters = createSharedCounters();
  private stopping = false;
  private reloading: Promise<void> | undefined;
  private pidFile = '';

  constructor(cycle: Cycle, opts: MasterOptions) {
    this.cycle = cycle;
    this.opts = opts;
    this.log = this.openLog(cycle);
  }

  private openLog(cycle: Cycle): ErrorLog {
    const core = coreSettings(cycle);
    const specs = core.errorLogs.length ? core.errorLogs : [{ file: this.opts.defaultErrorLog, level: LogLevel.error }];
    const log = new ErrorLog(specs);
    setMainErrorLog(log);
    return log;
  }

  private start(id: number, cycle: Cycle): Promise<WorkerSlot> {
    const data: WorkerStart = {
      workerId: id,
      snapshot: cycle.snapshot(),
      paths: cycle.paths,
      globals: this.opts.globals,
      defaultErrorLog: this.opts.defaultErrorLog,
      counters: this.counters,
    };
    const worker = new Worker(WORKER_URL, { workerData: data });
    const slot: WorkerSlot = { id, worker, retiring: false };
    return new Promise((resolve, reject) => {
      const onMessage = (m: WorkerMessage) => {
        if (m.type === 'ready') { cleanup(); resolve(slot); }
        if (m.type === 'failed') { cleanup(); void worker.terminate(); reject(new ConfError(m.error)); }
      };
      const onExit = (code: number) => { cleanup(); reject(new Error(`worker process exited with code ${code} during start`)); };
      const cleanup = () => { worker.off('message', onMessage); worker.off('exit', onExit); };
      worker.on('message', onMessage);
      worker.on('exit', onExit);
    }).then((s) => {
      const w = s as WorkerSlot;
      w.worker.on('error', (err) => this.log.alert(`worker process ${w.id} failed: ${(err as Error).stack ?? err}`));
      w.worker.on('exit', (code) => this.onWorkerExit(w, code));
      return w;
    });
  }

  /** Starts the workers and writes the pid file; rejects (nothing left running) on failure. */
  async run(): Promise<void> {
    const count = coreSettings(this.cycle).workerProcesses;
    try {
      for (let i = 0; i < count; i++) this.workers.push(await this.start(i, this.cycle));
    } catch (err) {
      for (const w of this.workers) { w.retiring = true; void w.worker.terminate(); }
      throw err;
    }
    this.writePid();
    this.installSignals();
    this.log.notice(`start worker processes`);
    this.opts.onReady?.();
  }

  private writePid(): void {
    this.pidFile = coreSettings(this.cycle).pid;
    if (!this.pidFile) return;
    fs.writeFileSync(this.pidFile, `${process.pid}\n`);
  }

  private removePid(): void {
    if (!this.pidFile) return;
    try {
      if (fs.readFileSync(this.pidFile, 'latin1').trim() === String(process.pid)) fs.unlinkSync(this.pidFile);
    } catch { /* already gone */ }
  }

  private installSignals(): void {
    process.on('SIGHUP', () => {
      this.log.notice('signal 1 (SIGHUP) received, reconfiguring');
      void this.reload();
    });
    process.on('SIGUSR1', () => {
      this.log.notice('signal 10 (SIGUSR1) received, reopening logs');
      reopenAll();
      this.broadcast({ type: 'reopen' });
    });
    process.on('SIGQUIT', () => {
      this.log.notice('signal 3 (SIGQUIT) received, shutting down');
      void this.shutdown('quit');
    });
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      process.on(sig, () => {
        this.log.notice(`signal ${sig === 'SIGTERM' ? 15 : 2} (${sig}) received, exiting`);
        void this.shutdown('stop');
      });
    }
    process.on('SIGWINCH', () => undefined);
    process.on('SIGUSR2', () => undefined);
    process.on('SIGPIPE', () => undefined);
  }

  private broadcast(msg: MasterMessage): void {
    for (const w of this.workers) w.worker.postMessage(msg);
  }

  /** HUP: load the configuration again; only a good one replaces the running one. */
  reload(): Promise<void> {
    const next = (this.reloading ?? Promise.resolve()).then(() => this.doReload());
    this.reloading = next.finally(() => { if (this.reloading === next) this.reloading = undefined; });
    return next;
  }

  private async doReload(): Promise<void> {
    if (this.stopping) return;
    let cycle: Cycle;
    try {
      cycle = Cycle.load(modules, { paths: this.cycle.paths, globals: this.opts.globals });
    } catch (err) {
      if (!(err instanceof ConfError)) throw err;
      this.log.emerg(err.text);
      return;
    }
    const active = this.workers.filter((w) => !w.retiring);
    const replies = active.map((w) => this.ask(w, { type: 'reload', snapshot: cycle.snapshot(), paths: cycle.paths, globals: this.opts.globals }));
    const results = await Promise.all(replies);
    const failed = results.find((m) => m.type === 'failed');
    if (failed && failed.type === 'failed') {
      for (const w of active) w.worker.postMessage({ type: 'abort' } satisfies MasterMessage);
      this.log.emerg(failed.error);
      return;
    }
    for (const w of active) w.worker.postMessage({ type: 'commit' } satisfies MasterMessage);
    this.cycle = cycle;
    const oldLog = this.log;
    this.log = this.openLog(cycle);
    oldLog.close();
    const want = coreSettings(cycle).workerProcesses;
    for (const w of active.slice(want)) this.retire(w, 'quit');
    for (let i = active.length; i < want; i++) {
      try {
        this.workers.push(await this.start(i, cycle));
      } catch (err) {
        this.log.alert(`could not start worker process ${i}: ${err instanceof ConfError ? err.text : err}`);
      }
    }
    this.log.notice('reconfiguring done');
  }

  private ask(w: WorkerSlot, msg: MasterMessage): Promise<WorkerMessage> {
    return new Promise((resolve) => {
      const onMessage = (m: WorkerMessage) => {
        if (m.type === 'prepared' || m.type === 'failed') { w.worker.off('message', onMessage); resolve(m); }
      };
      w.worker.on('message', onMessage);
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
    if (this.stopping) {
      if (this.workers.length === 0) this.exit();
      return;
    }
    if (w.retiring) return;
    this.log.alert(`worker process ${w.id} exited with code ${code}`);
    this.start(w.id, this.cycle).then(
      (slot) => { this.workers.push(slot); this.log.notice(`start worker process ${w.id}`); },
      (err) => this.log.alert(`could not respawn worker process ${w.id}: ${err instanceof ConfError ? err.text : err}`),
    );
  }

  private async shutdown(how: 'quit' | 'stop'): Promise<void> {
    if (this.stopping && how === 'quit') return;
    this.stopping = true;
    if (this.workers.length === 0) return this.exit();
    for (const w of this.workers) this.retire(w, how);
    if (how === 'stop') {
      // workers that do not exit promptly are terminated
      setTimeout(() => { for (const w of this.workers) void w.worker.terminate(); }, 2000).unref();
    }
  }

  private exit(): void {
    this.removePid();
    this.log.notice('exit');
    process.exit(0);
  }
}

export function describeStartError(err: unknown): string {
  if (err instanceof ConfError) return err.text;
  const e = err as NodeJS.ErrnoException;
  return e?.code ? `${e.message} ${sysErrorText(e)}` : String((e as Error)?.stack ?? e);
}

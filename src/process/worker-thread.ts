/**
 * One worker thread as the master starts it: V8's heap limits for workers,
 * the environment nginx's `env` gives them, and the wait until the worker
 * listens (or says why it could not).
 */
import v8 from 'node:v8';
import { Worker } from 'node:worker_threads';
import type { Cycle } from '../core/cycle.ts';
import { coreSettings } from '../core/modules/core.ts';
import type { ProcessRole, WorkerMessage, WorkerStart } from '../core/messages.ts';
import { ConfError } from '../conf/errors.ts';

const WORKER_URL = new URL('./worker.ts', import.meta.url);
/**
 * V8 grows the young generation when many objects survive (as thousands of
 * new keepalive connections do) beyond this, and gives the pages back only
 * seconds after the load stops: a fresh server's RSS per idle connection was
 * 10–12.5 KB instead of 8.5–9.5 KB. Smaller is not better: at 12–24 MiB the
 * 64 KiB proxy case of the bench doubled its CPU per request
 * (docs/performance.md).
 */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 32 };
/**
 * V8 starts a full collection when the room under the old generation's limit is smaller
 * than the young generation, counting buffers allocated outside its heap (read buffers)
 * against it. Left to V8, the limit sat a few MiB above a ~12 MiB live heap after load or
 * idle, and 100 MiB streamed ran 6–9 full collections at 2–3× the CPU (docs/performance.md).
 * A configured initial size is also the limit's floor; workers read it when they start.
 */
const WORKER_OLD_SPACE_FLOOR_MB = 64;
v8.setFlagsFromString(`--initial-old-space-size=${WORKER_OLD_SPACE_FLOOR_MB}`);

export interface WorkerSlot {
  /** Our index (worker 0 binds unix sockets); -1 for the privileged agent. */
  id: number;
  role: ProcessRole;
  /** Its configuration asked for a privileged agent (from its `ready` message). */
  agentWanted: boolean;
  worker: Worker;
  /** The thread id, shown as `PID#TID` in its log lines and as its number in ours. */
  tid: number;
  startedAt: number;
  /** Set while the master is stopping this worker on purpose. */
  retiring: boolean;
  /** The uncaught exception that killed it, if any. */
  failure?: string;
}

/** An error with its stack on one log line. */
export function oneLine(err: unknown): string {
  return String((err as Error)?.stack ?? err).replace(/\n\s*/g, ' ');
}

/** Starts worker `id` with `data`; resolves once it listens, rejects with why it did not. */
export function spawnWorker(id: number, data: WorkerStart): Promise<WorkerSlot> {
  const worker = new Worker(WORKER_URL, { workerData: data, env: data.env, resourceLimits: WORKER_LIMITS });
  const slot: WorkerSlot = { id, role: data.role, agentWanted: false, worker, tid: worker.threadId, startedAt: Date.now(), retiring: false };
  worker.on('error', (err) => { slot.failure = oneLine(err); });
  return new Promise<WorkerSlot>((resolve, reject) => {
    const onMessage = (m: WorkerMessage) => {
      if (m.type === 'ready') { slot.agentWanted = m.agent; cleanup(); resolve(slot); }
      if (m.type === 'failed') { cleanup(); void worker.terminate(); reject(new ConfError(m.error, undefined, undefined, m.level)); }
    };
    const onExit = (code: number) => {
      cleanup();
      reject(new Error(`worker process ${slot.tid} exited with code ${code} while starting${slot.failure ? `: ${slot.failure}` : ''}`));
    };
    const cleanup = () => { worker.off('message', onMessage); worker.off('exit', onExit); };
    worker.on('message', onMessage);
    worker.on('exit', onExit);
  });
}

/**
 * nginx's `env`: workers see TZ and the variables the configuration names
 * (`env NAME` keeps the inherited value, `env NAME=value` sets one), nothing
 * else from the master's environment (ngx_set_environment).
 */
export function workerEnv(cycle: Cycle): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { name, value } of [{ name: 'TZ', value: undefined }, ...coreSettings(cycle).env]) {
    const v = value ?? process.env[name];
    if (v !== undefined) env[name] = v;
  }
  return env;
}

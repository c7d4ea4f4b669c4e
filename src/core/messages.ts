/** Messages between the master thread and worker threads. */
import type { ConfPaths } from '../conf/context.ts';

export type ProcessRole = 'worker' | 'privileged agent';

/** workerData given to a new worker. */
export interface WorkerStart {
  workerId: number;
  /** A worker serves the listeners; OpenResty's privileged agent (ngx.process) listens on none. */
  role: ProcessRole;
  snapshot: Record<string, string>;
  paths: ConfPaths;
  globals: string | undefined;
  defaultErrorLog: string;
  counters: SharedArrayBuffer;
  /** Named shared zones (src/core/shared.ts). */
  zones: Map<string, SharedArrayBuffer>;
  /** The worker's environment (nginx's `env` directive). */
  env: Record<string, string>;
}

export type MasterMessage =
  /** Load this configuration and open its new listeners; answer `prepared` or `failed`. */
  | { type: 'reload'; snapshot: Record<string, string>; paths: ConfPaths; globals: string | undefined; zones: Map<string, SharedArrayBuffer>; env: Record<string, string> }
  /** Serve the prepared configuration; the previous one drains. */
  | { type: 'commit' }
  /** Drop the prepared configuration (another worker failed to prepare). */
  | { type: 'abort' }
  | { type: 'reopen' }
  /** Graceful stop: finish in-flight requests, then exit. */
  | { type: 'quit' }
  /** Fast stop: close everything now and exit. */
  | { type: 'stop' }
  /** Test hook (GATEHOUSE_TEST_CRASH, see src/process/master.ts): die the way a buggy worker would. */
  | { type: 'crash'; how: 'throw' | 'exit' };

export type WorkerMessage =
  /** `agent`: the configuration asked for a privileged agent (WorkerRuntime.requestPrivilegedAgent). */
  | { type: 'ready'; agent: boolean }
  | { type: 'prepared'; agent: boolean }
  | { type: 'failed'; error: string; /** the level nginx logs it at (init_by_lua errors are [error]) */ level?: string };

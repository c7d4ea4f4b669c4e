/** Messages between the master thread and worker threads. */
import type { ConfPaths } from '../conf/context.ts';

/** workerData given to a new worker. */
export interface WorkerStart {
  workerId: number;
  snapshot: Record<string, string>;
  paths: ConfPaths;
  globals: string | undefined;
  defaultErrorLog: string;
  counters: SharedArrayBuffer;
}

export type MasterMessage =
  | { type: 'reload'; snapshot: Record<string, string>; paths: ConfPaths; globals: string | undefined }
  | { type: 'commit' }
  | { type: 'abort' }
  | { type: 'reopen' }
  | { type: 'quit' }
  | { type: 'stop' };

export type WorkerMessage =
  | { type: 'ready'; threadId: number }
  | { type: 'prepared' }
  | { type: 'failed'; error: string };

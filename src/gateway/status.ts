/**
 * Which configuration each worker has: every worker's gateway runtime
 * answers "what revision do you have?" (worker-poll.ts), so the status
 * endpoint on the admin listener shows the store's revision beside each
 * worker's, and a worker that fell behind is visible (APISIX's users meet
 * stale workers with no way to see them).
 */
import { WorkerPoll } from './worker-poll.ts';

/** A worker's answer: its revision, and what else its follower tells (keys, relists, error). */
export interface WorkerRevision { worker: number; revision: number; [detail: string]: unknown }

export class StatusChannel {
  private readonly poll: WorkerPoll<{ revision: number }>;

  constructor(storeFile: string, report: () => Promise<{ revision: number }>) {
    this.poll = new WorkerPoll(`gatehouse-gateway-status:${storeFile}`, report);
  }

  /** Every worker's revision: this one's, and the others' as they answer. */
  async ask(own: { revision: number }, workers: number): Promise<WorkerRevision[]> {
    return (await this.poll.ask(own, workers)).map((a) => ({ worker: a.worker, ...a.answer }));
  }

  close(): void {
    this.poll.close();
  }
}

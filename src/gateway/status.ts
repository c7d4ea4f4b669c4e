/**
 * Which configuration each worker has: every worker's gateway runtime
 * answers "what revision do you have?" on a BroadcastChannel named after
 * the store, so the status endpoint on the admin listener shows the store's
 * revision beside each worker's, and a worker that fell behind is visible
 * (APISIX's users meet stale workers with no way to see them).
 */
import { BroadcastChannel, threadId } from 'node:worker_threads';

interface Ask { type: 'ask'; id: number }
interface Tell { type: 'tell'; id: number; report: WorkerRevision }

/** A worker's answer: its revision, and what else its follower tells (keys, relists, error). */
export interface WorkerRevision { worker: number; revision: number; [detail: string]: unknown }

/** A reply not arriving within this is a worker that is stuck (or gone). */
const ASK_TIMEOUT_MS = 500;

export class StatusChannel {
  private readonly channel: BroadcastChannel;
  private readonly pending = new Map<number, { replies: WorkerRevision[]; done: () => void; expected: number }>();
  private nextAsk = 1;

  constructor(storeFile: string, report: () => Promise<{ revision: number }>) {
    this.channel = new BroadcastChannel(`gatehouse-gateway-status:${storeFile}`);
    this.channel.unref();
    this.channel.onmessage = (ev: unknown) => {
      const msg = (ev as { data: Ask | Tell }).data;
      if (msg.type === 'ask') {
        void report().then((r) => this.channel.postMessage({ type: 'tell', id: msg.id, report: { worker: threadId, ...r } } satisfies Tell));
      }
      else this.collect(msg);
    };
  }

  private collect(msg: Tell): void {
    const p = this.pending.get(msg.id);
    if (!p) return;
    p.replies.push(msg.report);
    if (p.replies.length >= p.expected) p.done();
  }

  /** Every worker's revision: this one's, and the others' as they answer. */
  ask(own: { revision: number }, workers: number): Promise<WorkerRevision[]> {
    const id = threadId * 1e6 + this.nextAsk++;
    const replies: WorkerRevision[] = [{ worker: threadId, ...own }];
    return new Promise((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve(replies.sort((a, b) => a.worker - b.worker));
      };
      const timer = setTimeout(finish, ASK_TIMEOUT_MS);
      this.pending.set(id, { replies, done: finish, expected: workers });
      if (workers <= 1) finish();
      else this.channel.postMessage({ type: 'ask', id } satisfies Ask);
    });
  }

  close(): void {
    this.channel.close();
  }
}

/**
 * Asking every worker of the gateway the same question: each worker's
 * runtime answers on a BroadcastChannel of its own name, and the asker
 * gathers the answers (its own first) until all came or a deadline passed
 * (a worker that does not answer is stuck or gone). The status endpoint
 * asks for revisions, the metrics endpoint for counters.
 */
import { BroadcastChannel, threadId } from 'node:worker_threads';

interface Ask { type: 'ask'; id: number }
interface Tell<T> { type: 'tell'; id: number; worker: number; answer: T }

/** A reply not arriving within this is a worker that is stuck (or gone). */
const ASK_TIMEOUT_MS = 500;

export interface WorkerAnswer<T> { worker: number; answer: T }

export class WorkerPoll<T> {
  private readonly channel: BroadcastChannel;
  private readonly pending = new Map<number, { replies: WorkerAnswer<T>[]; done: () => void; expected: number }>();
  private nextAsk = 1;

  /** `name`: the channel (every worker of one gateway uses the same); `answer`: this worker's answer. */
  constructor(name: string, answer: () => Promise<T> | T) {
    this.channel = new BroadcastChannel(name);
    this.channel.unref();
    this.channel.onmessage = (ev: unknown) => {
      const msg = (ev as { data: Ask | Tell<T> }).data;
      if (msg.type === 'ask') {
        void Promise.resolve(answer()).then((a) => this.channel.postMessage({ type: 'tell', id: msg.id, worker: threadId, answer: a } satisfies Tell<T>));
      } else {
        const p = this.pending.get(msg.id);
        if (!p) return;
        p.replies.push({ worker: msg.worker, answer: msg.answer });
        if (p.replies.length >= p.expected) p.done();
      }
    };
  }

  /** Every worker's answer: `own` (this worker's), and the others' as they come, by worker id. */
  ask(own: T, workers: number): Promise<WorkerAnswer<T>[]> {
    const id = threadId * 1e6 + this.nextAsk++;
    const replies: WorkerAnswer<T>[] = [{ worker: threadId, answer: own }];
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

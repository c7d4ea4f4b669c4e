// What a loopback receiver of the logger tests got (requests, lines, datagrams), with a wait for the nth.
/** What a receiver got, with a wait for the nth item. */
export class Inbox<T> {
  readonly items: T[] = [];
  private waiters: Array<{ n: number; resolve: () => void }> = [];

  push(item: T): void {
    this.items.push(item);
    this.waiters = this.waiters.filter((w) => (this.items.length >= w.n ? (w.resolve(), false) : true));
  }

  /** Resolves with the first `n` items once they are in (fails after 15 s: nothing came). */
  async until(n: number): Promise<T[]> {
    if (this.items.length < n) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => this.waiters.push({ n, resolve })),
        new Promise<never>((_r, reject) => { timer = setTimeout(() => reject(new Error(`only ${this.items.length} of ${n} received`)), 15_000); }),
      ]).finally(() => clearTimeout(timer));
    }
    return this.items.slice(0, n);
  }
}

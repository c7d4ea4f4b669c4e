/**
 * One direction of a proxied stream session: what `src` delivers is
 * written to `dst`, reading pauses while `dst` has not drained, and
 * proxy_upload_rate / proxy_download_rate hold bytes back the way
 * ngx_stream_proxy_process does: at most `rate × (seconds since start + 1)`
 * bytes in total, and a pause of `bytes / rate` after each write. Node
 * delivers whole chunks, so the part of a chunk over the limit is held
 * (a view of the same buffer, no copy) until its time comes.
 */
import type { Socket } from 'node:net';

/** Where the bytes taken from `src` are counted (nginx's s->received or u->received). */
export interface ByteCounter {
  received: number;
}

export class Pump {
  private readonly counter: ByteCounter;
  private readonly src: Socket;
  private readonly dst: Socket;
  private readonly rate: number;
  private readonly startSec: number;
  /** Bytes of a chunk not yet allowed through. */
  private held: Buffer | undefined;
  private waitsDrain = false;
  private delayed = false;
  private timer: NodeJS.Timeout | undefined;
  /** What to do at the source's EOF, once the bytes held back are through. */
  private atEnd: (() => void) | undefined;

  /** `rate` in bytes per second, 0 for none; `startSec` is when the session started proxying, in whole seconds. */
  constructor(src: Socket, dst: Socket, counter: ByteCounter, rate: number, startSec: number) {
    this.counter = counter;
    this.src = src;
    this.dst = dst;
    this.rate = rate;
    this.startSec = startSec;
  }

  /** A chunk read from `src`. */
  push(chunk: Buffer): void {
    if (this.rate === 0) {
      this.counter.received += chunk.length;
      if (!this.dst.write(chunk)) {
        this.waitsDrain = true;
        this.src.pause();
      }
      return;
    }
    this.held = chunk;
    this.delayed = true;
    this.src.pause();
    this.release();
  }

  /** `dst` took what was written: reading may go on. */
  drained(): void {
    this.waitsDrain = false;
    if (!this.delayed) this.src.resume();
  }

  /**
   * The source ended (Node reports it even while bytes are held here):
   * `then` runs once they are written, as nginx reads the EOF only after them.
   */
  end(then: () => void): void {
    if (this.held === undefined) then();
    else this.atEnd = then;
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.held = undefined;
    this.atEnd = undefined;
  }

  /** Lets through what the rate allows now, then waits as nginx's read timer would. */
  private readonly release = (): void => {
    this.timer = undefined;
    const chunk = this.held;
    if (!chunk) {
      this.delayed = false;
      const atEnd = this.atEnd;
      this.atEnd = undefined;
      if (atEnd) atEnd();
      else if (!this.waitsDrain) this.src.resume();
      return;
    }
    const limit = this.rate * (Math.floor(Date.now() / 1000) - this.startSec + 1) - this.counter.received;
    if (limit <= 0) {
      this.timer = setTimeout(this.release, Math.floor((-limit * 1000) / this.rate) + 1);
      return;
    }
    const take = Math.min(chunk.length, limit);
    this.counter.received += take;
    this.held = take < chunk.length ? chunk.subarray(take) : undefined;
    if (!this.dst.write(take < chunk.length ? chunk.subarray(0, take) : chunk)) this.waitsDrain = true;
    this.timer = setTimeout(this.release, Math.floor((take * 1000) / this.rate));
  };
}

/**
 * proxy_limit_rate: how fast a buffered response is read from the upstream
 * (nginx's event pipe). The allowance is nginx's: rate × (whole seconds
 * since the body began + 1) − bytes read so far. What a read brings beyond
 * it is held (at most one socket read) with the upstream paused, and handed
 * on when the allowance has grown; nginx polls each millisecond until the
 * second turns, this waits for that second at once.
 */
import { parseSize } from '../../conf/values.ts';
import type { HttpRequest } from '../request.ts';
import type { ComplexValue } from '../../core/variables.ts';

/** The rate for this response, evaluated once its head is in (ngx_http_complex_value_size: invalid → unlimited). */
export function limitRateOf(r: HttpRequest, v: number | ComplexValue | undefined): number {
  if (v === undefined || typeof v === 'number') return v ?? 0;
  const n = parseSize(v.evaluate(r));
  return Number.isNaN(n) ? 0 : n;
}

export interface RateLimitedSource {
  /** Body bytes as read from the upstream, now allowed through. */
  deliver(b: Buffer): void;
  pause(): void;
  resume(): void;
}

export class ReadRateLimit {
  private readonly rate: number;
  private readonly src: RateLimitedSource;
  private readonly startSec = Math.floor(Date.now() / 1000);
  private read = 0;
  private held: Buffer | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The relay asked for a pause (client slow): held bytes wait for it too. */
  private relayBlocked = false;
  /** Run once nothing is held any more (the upstream's end waits for that). */
  private onDrained: (() => void) | undefined;

  constructor(rate: number, src: RateLimitedSource) {
    this.rate = rate;
    this.src = src;
  }

  get holding(): boolean {
    return this.held !== undefined;
  }

  feed(chunk: Buffer): void {
    if (this.held) {
      // bytes already in flight when reading stopped
      this.held = Buffer.concat([this.held, chunk]);
      return;
    }
    this.take(chunk);
  }

  whenDrained(fn: () => void): void {
    if (!this.held) fn();
    else this.onDrained = fn;
  }

  relayPaused(): void {
    this.relayBlocked = true;
    this.src.pause();
  }

  relayResumed(): void {
    this.relayBlocked = false;
    if (this.held) {
      if (!this.timer) this.release();
      return;
    }
    this.src.resume();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.held = undefined;
    this.onDrained = undefined;
  }

  private take(chunk: Buffer): void {
    const nowMs = Date.now();
    const allowance = this.rate * (Math.floor(nowMs / 1000) - this.startSec + 1) - this.read;
    if (allowance >= chunk.length) {
      this.read += chunk.length;
      this.src.deliver(chunk);
      return;
    }
    if (allowance > 0) {
      this.read += allowance;
      this.src.deliver(chunk.subarray(0, allowance));
      chunk = chunk.subarray(allowance);
    }
    this.held = chunk;
    this.src.pause();
    // the first second in which rate × (seconds + 1) exceeds what was read
    const dueSec = this.startSec + Math.floor(this.read / this.rate);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.relayBlocked) this.release();
    }, Math.max(1, dueSec * 1000 - Date.now() + 1));
  }

  private release(): void {
    const b = this.held!;
    this.held = undefined;
    this.take(b);
    if (this.held) return;
    if (!this.relayBlocked) this.src.resume();
    const fn = this.onDrained;
    this.onDrained = undefined;
    fn?.();
  }
}

/**
 * A connection's one timer: a deadline of some kind (header read, keepalive
 * idle, send, linger). Moving the deadline later only updates it — the
 * timer fires early, sees the later deadline and re-arms — so the timeouts
 * a request passes through cost no timer calls.
 */
export class Deadline {
  /** What the deadline is for (0: none). */
  kind = 0;
  private due = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = 0;
  private readonly expire: (kind: number) => void;

  constructor(expire: (kind: number) => void) {
    this.expire = expire;
  }

  /** Expires `ms` from now with `kind`. */
  set(ms: number, kind: number): void {
    const due = Date.now() + Math.max(1, ms);
    this.due = due;
    this.kind = kind;
    if (this.timer !== undefined && this.timerAt <= due) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerAt = due;
    this.timer = setTimeout(this.onTimer, due - Date.now());
  }

  /** No deadline (the timer, if set, fires and does nothing). */
  clear(): void {
    this.kind = 0;
  }

  /** No deadline and no timer (the connection closed). */
  stop(): void {
    this.kind = 0;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private onTimer = (): void => {
    this.timer = undefined;
    const kind = this.kind;
    if (kind === 0) return;
    const now = Date.now();
    if (now < this.due) {
      this.timerAt = this.due;
      this.timer = setTimeout(this.onTimer, this.due - now);
      return;
    }
    this.kind = 0;
    this.expire(kind);
  };
}

/**
 * A cosocket's connection: a Node socket (plain or TLS) with the bytes read
 * but not yet received held in order, and the reads tcpsock:receive* make
 * over them (a line, a size, all, any, up to a pattern). A read answers at
 * once when what is held is enough; otherwise it waits for more, for the
 * end, or for its timeout, as OpenResty's input filters do over u->buffer.
 */
import type net from 'node:net';

/** What a read or write gives Lua: the data, or OpenResty's error and what was read before it. */
export type ReadResult = { data: Buffer } | { err: string; partial: Buffer };

export class CosocketStream {
  socket: net.Socket;
  private chunks: Buffer[] = [];
  private held = 0;
  /** The peer ended (or the connection failed): no more bytes will come. */
  ended = false;
  /** The connection failed (reset …): reads then report `closed` too, as OpenResty does. */
  failed: Error | undefined;
  private wake: (() => void) | undefined;
  /** Times this connection was taken from the pool (tcpsock:getreusedtimes). */
  reused = 0;
  /** Set while the connection waits in the pool: any event there means it can no longer be used. */
  onIdleEvent: (() => void) | undefined;
  /** What a read that meets the end says: `closed`, or `client aborted` for a request socket whose client went away. */
  endError = 'closed';
  /** Called after a read took bytes (a fed stream's producer may go on). */
  onTake: (() => void) | undefined;
  /** The first send set TCP_NODELAY (OpenResty's `lua socket tcp_nodelay`, once per connection). */
  nodelay = false;

  /**
   * Over `socket`'s bytes; with `fed`, the bytes come from push() and
   * finish() instead (a request socket: the request body, or the client's
   * connection once its HTTP reading stopped) and `socket` is where sends go.
   */
  constructor(socket: net.Socket, fed = false) {
    this.socket = socket;
    if (!fed) this.listen(socket);
  }

  /** After sslhandshake the TLS socket carries the bytes (the plain one's are its input now). */
  replace(socket: net.Socket): void {
    this.socket = socket;
    this.listen(socket);
  }

  private listen(socket: net.Socket): void {
    socket.on('data', (d: Buffer) => { if (socket === this.socket) this.push(d); });
    socket.on('end', () => { if (socket === this.socket) this.finish(undefined); });
    socket.on('error', (e) => { if (socket === this.socket) this.finish(e); });
    socket.on('close', () => { if (socket === this.socket) this.finish(undefined); });
  }

  /** Bytes arrived. */
  push(d: Buffer): void {
    if (d.length === 0) return;
    this.chunks.push(d);
    this.held += d.length;
    this.notify();
  }

  /** No more bytes will come (`err`: the connection failed). */
  finish(err: Error | undefined): void {
    if (err && !this.failed) this.failed = err;
    this.ended = true;
    this.notify();
  }

  private notify(): void {
    if (this.onIdleEvent) return this.onIdleEvent();
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  get buffered(): number {
    return this.held;
  }

  /** Everything held, as one buffer (kept as one afterwards). */
  private peek(): Buffer {
    if (this.chunks.length !== 1) this.chunks = [this.chunks.length === 0 ? Buffer.alloc(0) : Buffer.concat(this.chunks)];
    return this.chunks[0];
  }

  /** Takes the first `n` bytes held (and drops `skip` more after them). */
  private take(n: number, skip = 0): Buffer {
    const all = this.peek();
    const out = Buffer.from(all.subarray(0, n));
    const rest = all.subarray(n + skip);
    this.chunks = rest.length ? [rest] : [];
    this.held = rest.length;
    this.onTake?.();
    return out;
  }

  /** Resolves when more bytes are held, the peer ended, or after `ms` (false then). */
  private more(ms: number): Promise<boolean> {
    if (this.ended) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve(false);
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }

  /**
   * Runs `step` over what is held until it answers: at once when it can,
   * else after each arrival. `step(all, ended)` returns the answer or
   * undefined to wait (it looks at `peek()` itself: `*a` need not join what it holds on every
   * arrival); at the end it must answer. A timeout gives
   * `timeout` with `partial(held)` (consumed).
   */
  private read(ms: number, step: (ended: boolean) => ReadResult | undefined,
    partial: (held: Buffer) => Buffer, onTimeout: () => void): ReadResult | Promise<ReadResult> {
    const now = step(this.ended);
    if (now) return now;
    const loop = async (): Promise<ReadResult> => {
      for (;;) {
        if (!(await this.more(ms))) {
          onTimeout();
          const p = partial(this.peek());
          this.take(this.held);
          return { err: 'timeout', partial: p };
        }
        const r = step(this.ended);
        if (r) return r;
      }
    };
    return loop();
  }

  /** The rest of the bytes as `closed`'s partial result. */
  private closed(partial = (b: Buffer) => b): ReadResult {
    const p = partial(this.take(this.held));
    return { err: this.endError, partial: p };
  }

  /** receive("*l"): a line without its `\n`; every `\r` in it is dropped (ngx_http_lua_read_line). */
  readLine(ms: number, onTimeout: () => void): ReadResult | Promise<ReadResult> {
    return this.read(ms, (ended) => {
      const nl = this.peek().indexOf(10);
      if (nl >= 0) return { data: dropCR(this.take(nl, 1)) };
      return ended ? this.closed(dropCR) : undefined;
    }, dropCR, onTimeout);
  }

  /** receive(n): exactly `n` bytes. */
  readSize(n: number, ms: number, onTimeout: () => void): ReadResult | Promise<ReadResult> {
    return this.read(ms, (ended) => {
      if (this.held >= n) return { data: this.take(n) };
      return ended ? this.closed() : undefined;
    }, (b) => b, onTimeout);
  }

  /** receive("*a"): everything until the peer closes (then no error). */
  readAll(ms: number, onTimeout: () => void): ReadResult | Promise<ReadResult> {
    // (a request socket whose client went away is `client aborted` here too)
    return this.read(ms, (ended) => (!ended ? undefined : this.endError === 'closed' ? { data: this.take(this.held) } : this.closed()),
      (b) => b, onTimeout);
  }

  /** receiveany(max): what is there, at most `max`, waiting only when nothing is. */
  readAny(max: number, ms: number, onTimeout: () => void): ReadResult | Promise<ReadResult> {
    return this.read(ms, (ended) => {
      if (this.held > 0) return { data: this.take(Math.min(max, this.held)) };
      return ended ? this.closed() : undefined;
    }, (b) => b, onTimeout);
  }

  /**
   * A receiveuntil iterator's read: the bytes before `pattern` (with it when
   * `inclusive`). With `size`, at most that many at a time; `found` says the
   * pattern was reached (the iterator's next call then gives nil).
   */
  readUntil(pattern: Buffer, inclusive: boolean, size: number | undefined, ms: number, onTimeout: () => void,
    found: () => void): ReadResult | Promise<ReadResult> {
    return this.read(ms, (ended) => {
      const held = this.peek();
      const at = held.indexOf(pattern);
      if (at >= 0 && (size === undefined || at <= size)) {
        found();
        return { data: this.take(at + (inclusive ? pattern.length : 0), inclusive ? 0 : pattern.length) };
      }
      if (size !== undefined) {
        // bytes that cannot start the pattern may go out in pieces of `size`
        const safe = at >= 0 ? at : held.length - overlap(held, pattern);
        if (safe >= size) return { data: this.take(size) };
      }
      return ended ? this.closed() : undefined;
    }, (b) => b, onTimeout);
  }

  /** Drops what is held (the connection is closed or reconnected). */
  discard(): void {
    this.chunks = [];
    this.held = 0;
  }
}

/** How many of `held`'s last bytes are a beginning of `pattern`. */
function overlap(held: Buffer, pattern: Buffer): number {
  for (let k = Math.min(pattern.length - 1, held.length); k > 0; k--) {
    if (held.subarray(held.length - k).equals(pattern.subarray(0, k))) return k;
  }
  return 0;
}

function dropCR(b: Buffer): Buffer {
  return b.includes(13) ? Buffer.from(b.filter((c) => c !== 13)) : b;
}

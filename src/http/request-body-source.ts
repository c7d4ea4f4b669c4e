/**
 * The request body as it arrives from the client, before anyone reads it
 * (nginx's r->request_body input side): the connection pushes decoded body
 * bytes in (HTTP/1 after its framing, HTTP/2 from DATA frames), the reader
 * (src/http/request-body.ts) takes them with backpressure. Bytes that come
 * before a reader starts wait here; past `HOLD_LIMIT` the producer is told
 * to stop reading from the client until the reader wants more.
 */

/** Receives body bytes once reading starts. */
export interface BodyListener {
  data(chunk: Buffer): void;
  end(): void;
  /** 400: the body's framing broke; 499: the client went away before the body was complete. */
  error(status: number): void;
  /** A chunk's size was read (see RequestBodySource.pendingChunk). */
  announced(): void;
}

/** The producer's side: stop and go on reading from the client. */
export interface BodyFlow {
  pause(): void;
  resume(): void;
}

/** Bytes held for a reader that has not started (or paused) before the client is paused. */
const HOLD_LIMIT = 64 * 1024;

const NO_FLOW: BodyFlow = { pause() {}, resume() {} };

export class RequestBodySource {
  /** Every body byte arrived (or there was no body). */
  complete = false;
  /** The body failed (its status, see BodyListener.error); nothing more arrives. */
  failedWith = 0;
  /** A chunked body's chunk still arriving: the body bytes before it and its size. */
  pendingChunk: { before: number; size: number } | undefined;
  private held: Buffer[] = [];
  private heldBytes = 0;
  private listener: BodyListener | undefined;
  private paused = false;
  /** The producer was told to pause. */
  private producerPaused = false;
  private readonly flow: BodyFlow;

  constructor(flow: BodyFlow = NO_FLOW) {
    this.flow = flow;
  }

  /** A source with no body (GET, a subrequest's own). */
  static empty(): RequestBodySource {
    const s = new RequestBodySource();
    s.complete = true;
    return s;
  }

  /** Producer: body bytes arrived; false when the producer should stop reading until resumed. */
  push(chunk: Buffer): boolean {
    if (this.failedWith) return true;
    const l = this.listener;
    if (l !== undefined && !this.paused && this.held.length === 0) {
      l.data(chunk);
      if (!this.paused) return true;
      this.producerPaused = true;
      return false;
    }
    this.held.push(chunk);
    this.heldBytes += chunk.length;
    if (this.heldBytes > HOLD_LIMIT || (l !== undefined && this.paused)) {
      this.producerPaused = true;
      return false;
    }
    return true;
  }

  /** Producer: a chunk's size was read, its data still to come. */
  announce(chunk: { before: number; size: number }): void {
    this.pendingChunk = chunk;
    this.listener?.announced();
  }

  /** Producer: the body is complete. */
  end(): void {
    if (this.complete || this.failedWith) return;
    this.complete = true;
    if (this.listener !== undefined && !this.paused && this.held.length === 0) this.listener.end();
  }

  /** Producer: the body failed (400 bad framing, 499 client gone). */
  fail(status: number): void {
    if (this.complete || this.failedWith) return;
    this.failedWith = status;
    this.held.length = 0;
    this.heldBytes = 0;
    const l = this.listener;
    this.listener = undefined;
    l?.error(status);
  }

  /** Whether a reader is attached. */
  get reading(): boolean {
    return this.listener !== undefined;
  }

  /** A reader took (or takes) the body: its bytes are no longer the client's raw bytes to give away (ngx.req.socket(true)). */
  started = false;

  /** The body is not read by anyone (a raw request socket took the connection's bytes): what waited is dropped. */
  drop(): void {
    this.held.length = 0;
    this.heldBytes = 0;
    this.complete = true;
  }

  /** Reader: starts (or restarts after stop) taking the body; what waited is delivered in a microtask. */
  read(listener: BodyListener): void {
    this.started = true;
    this.listener = listener;
    this.paused = false;
    queueMicrotask(() => this.deliver());
  }

  /** Reader: stop receiving (done, or gave up). */
  stop(listener: BodyListener): void {
    if (this.listener === listener) this.listener = undefined;
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.deliver();
  }

  private deliver(): void {
    while (this.listener !== undefined && !this.paused && this.held.length > 0) {
      const chunk = this.held.shift()!;
      this.heldBytes -= chunk.length;
      this.listener.data(chunk);
    }
    const l = this.listener;
    if (l === undefined || this.paused) return;
    if (this.failedWith) {
      this.listener = undefined;
      l.error(this.failedWith);
      return;
    }
    if (this.complete) {
      this.listener = undefined;
      l.end();
      return;
    }
    if (this.producerPaused) {
      this.producerPaused = false;
      this.flow.resume();
    }
  }
}

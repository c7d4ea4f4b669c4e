/**
 * Where a response goes once the filters are done with it (the end of
 * nginx's output chain, ngx_http_write_filter): one interface with three
 * implementations, the HTTP/1 socket (src/http/http1-response.ts), the
 * HTTP/2 stream (src/http/http2/stream.ts) and a subrequest's buffer
 * (src/http/subrequest.ts).
 *
 * A sink takes the head once (status, reason, headers in order), then body
 * chunks with backpressure (write returns false: wait for onceDrain), then
 * the end (with trailers if any were set). It tells when everything was
 * handed to the client (onFinish) and when it is over either way (onClose:
 * after the finish, or when the client went away or the response was
 * aborted); the log phase runs then.
 */
import type { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';

/** What the end of the body filter chain writes into (a response sink, or a subrequest's place in its parent's output). */
export interface BodySink {
  write(chunk: Buffer): boolean;
  /** The last bytes (maybe none); the sink finishes once they are out. */
  end(chunk?: Buffer): void;
  /** `fn` runs once the sink can take more after a write that returned false. */
  onceDrain(fn: () => void): void;
  /** The sink is gone (client closed, aborted): writes go nowhere. */
  readonly destroyed: boolean;
  /** end() was called. */
  readonly ended: boolean;
}

export interface ResponseSink extends BodySink {
  /** The head was handed to the sink (nginx's r->header_sent). */
  readonly headersSent: boolean;
  /** Everything, end included, reached the client's connection (the next request may start). */
  readonly finished: boolean;
  /**
   * The client side whose 'end' (FIN) and 'close' mean the client went away
   * (nginx's ngx_http_test_reading): the socket for HTTP/1, the stream for
   * HTTP/2, the subrequest's own stand-in; `readableEnded` once the FIN came.
   */
  readonly client: (EventEmitter & { readonly readableEnded: boolean }) | null;
  /** The connection's socket when this response may take it over (HTTP/1: upgrade, HTTP/0.9 relay). */
  readonly socket: Socket | null;

  /**
   * Takes the head: `headers` as name/value pairs in the order they go out.
   * `chunked`: the body is sent with HTTP/1.1 chunked framing. The head is
   * sent with the first body bytes, at the end, or at flushHead().
   */
  sendHead(status: number, reason: string, headers: string[], chunked: boolean): void;
  /** Sends the head now (a relay that has no body bytes yet, an upgrade). */
  flushHead(): void;
  /** `HTTP/1.1 100 Continue` (HTTP/1 only). */
  writeContinue(): void;
  /** Trailers sent after the body (add_trailer): name/value pairs. */
  setTrailers(trailers: string[]): void;
  /** Trailers may follow the body (nginx's r->expect_trailers), told before the head is sent: HTTP/2 ends the stream after them, not with the last DATA. */
  expectTrailers?(): void;
  /** Ends the response without completing it: the connection (or stream) is dropped. */
  abort(): void;
  /**
   * The response is complete but the request goes on (ngx.eof, then more Lua):
   * its finish — the log phase, keepalive or close — waits for `until`, as
   * nginx's request count keeps the request and its connection.
   */
  holdFinish?(until: Promise<unknown>): void;
  /** The request's method changed before the head (ngx.req.set_method): a HEAD response has no body. */
  setHeadOnly?(on: boolean): void;
  /**
   * The connection was taken raw (ngx.req.socket(true), HTTP/1 only): a head
   * still held is dropped and no framing is added from now on.
   */
  giveUpFraming?(): void;

  onFinish(fn: () => void): void;
  onClose(fn: () => void): void;
  offClose(fn: () => void): void;

  /** `$bytes_sent`: what went to the client for this response, head and framing included. */
  readonly bytesSent: number;
  /** `$body_bytes_sent`: bytesSent without the head. */
  readonly bodyBytesSent: number;
}

/**
 * The listeners a sink keeps: finish and close run once each, in the order
 * they were added; close after finish.
 */
export class SinkListeners {
  private finishFns: Array<() => void> | undefined;
  private closeFns: Array<() => void> | undefined;
  private drainFns: Array<() => void> | undefined;
  finishedFired = false;
  closedFired = false;

  onFinish(fn: () => void): void {
    if (this.finishedFired) queueMicrotask(fn);
    else (this.finishFns ??= []).push(fn);
  }

  onClose(fn: () => void): void {
    if (this.closedFired) queueMicrotask(fn);
    else (this.closeFns ??= []).push(fn);
  }

  offClose(fn: () => void): void {
    const list = this.closeFns;
    if (!list) return;
    const i = list.indexOf(fn);
    if (i >= 0) list.splice(i, 1);
  }

  onceDrain(fn: () => void): void {
    (this.drainFns ??= []).push(fn);
  }

  fireDrain(): void {
    const list = this.drainFns;
    if (!list) return;
    this.drainFns = undefined;
    for (const fn of list) fn();
  }

  fireFinish(): void {
    if (this.finishedFired) return;
    this.finishedFired = true;
    const list = this.finishFns;
    this.finishFns = undefined;
    if (list) for (const fn of list) fn();
  }

  fireClose(): void {
    if (this.closedFired) return;
    this.closedFired = true;
    this.drainFns = undefined;
    const list = this.closeFns;
    this.closeFns = undefined;
    if (list) for (const fn of list) fn();
  }
}

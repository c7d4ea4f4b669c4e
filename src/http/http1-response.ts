/**
 * The HTTP/1.x response sink: writes the head as nginx writes it, byte for
 * byte, and the body with chunked framing when the response is chunked,
 * straight to the client's socket. The head waits for the first body bytes
 * (one write for both) unless flushed. HTTP/0.9 gets the body alone.
 *
 * Bytes are counted as nginx counts them (c->sent): everything written to
 * the socket for this response, a `100 Continue` included; requests on a
 * connection are answered one at a time, so the socket's counter at the
 * start and at the end of a response says.
 */
import type { Socket } from 'node:net';
import { chunkSizeLine, LAST_CHUNK } from './chunked.ts';
import { SinkListeners } from './response-sink.ts';
import type { BodySink, ResponseSink } from './response-sink.ts';

const CRLF = Buffer.from('\r\n', 'latin1');
const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
const EMPTY = Buffer.alloc(0);
/** Up to this many body bytes go out in one buffer with the head. */
const SINGLE_WRITE_MAX = 16 * 1024;

export class Http1Response extends SinkListeners implements ResponseSink {
  readonly socket: Socket;
  /** A HEAD request: the head goes out, body bytes do not. */
  private headOnly: boolean;
  private readonly http09: boolean;
  private readonly startMark: number;
  private endMark = -1;
  private head: string | undefined;
  private headLength = 0;
  private headWritten = false;
  private chunked = false;
  private noBody = false;
  private trailers: string[] | undefined;
  headersSent = false;
  destroyed = false;
  ended = false;
  finished = false;
  /** What the finish waits for (holdFinish). */
  private finishHold: Promise<unknown> | undefined;

  constructor(socket: Socket, headOnly: boolean, http09: boolean) {
    super();
    this.socket = socket;
    this.headOnly = headOnly;
    this.http09 = http09;
    this.startMark = socket.bytesWritten;
  }

  get client(): Socket {
    return this.socket;
  }

  setHeadOnly(on: boolean): void {
    this.headOnly = on;
  }

  sendHead(status: number, reason: string, headers: string[], chunked: boolean): void {
    if (this.headersSent) return;
    this.headersSent = true;
    if (this.http09) return;
    this.noBody = this.headOnly || status === 204 || status === 304 || (status >= 100 && status < 200);
    this.chunked = chunked && !this.noBody;
    // one join makes one flat string instead of a chain of concatenations
    const parts = new Array<string>(headers.length * 2 + 2);
    parts[0] = `HTTP/1.1 ${status} ${reason}`;
    let n = 1;
    for (let i = 0; i < headers.length; i += 2) {
      parts[n++] = '\r\n';
      parts[n++] = headers[i];
      parts[n++] = ': ';
      parts[n++] = headers[i + 1];
    }
    parts[n] = '\r\n\r\n';
    this.head = parts.join('');
    this.headLength = this.head.length;
  }

  /**
   * ngx.req.socket(true) took the connection: what goes out from now on is
   * the caller's bytes only. A head not written yet (it waits for the first
   * body bytes) is dropped, as nginx drops what its write filter postponed,
   * and no chunked framing is added (no last chunk at the end).
   */
  giveUpFraming(): void {
    this.head = undefined;
    this.chunked = false;
  }

  flushHead(): void {
    if (this.head === undefined || this.destroyed) return;
    this.socket.write(this.takeHead()!, 'latin1');
  }

  /** The head not written yet (undefined once it was), counted as written from now on. */
  private takeHead(): string | undefined {
    const head = this.head;
    if (head === undefined) return undefined;
    this.head = undefined;
    this.headWritten = true;
    return head;
  }

  writeContinue(): void {
    if (!this.destroyed && !this.http09) this.socket.write(CONTINUE, 'latin1');
  }

  setTrailers(trailers: string[]): void {
    this.trailers = trailers;
  }

  write(chunk: Buffer): boolean {
    if (this.destroyed || this.ended) return true;
    if (this.noBody || chunk.length === 0) {
      this.flushHead();
      return true;
    }
    const socket = this.socket;
    if (this.head === undefined && !this.chunked) return socket.write(chunk);
    socket.cork();
    const head = this.takeHead();
    if (head !== undefined) socket.write(head, 'latin1');
    let ok: boolean;
    if (this.chunked) {
      socket.write(chunkSizeLine(chunk.length), 'latin1');
      socket.write(chunk);
      ok = socket.write(CRLF);
    } else {
      ok = socket.write(chunk);
    }
    socket.uncork();
    return ok;
  }

  end(chunk?: Buffer): void {
    if (this.ended || this.destroyed) return;
    const socket = this.socket;
    const size = chunk === undefined || this.noBody ? 0 : chunk.length;
    if (this.head !== undefined && size <= SINGLE_WRITE_MAX && !(this.chunked && this.trailers)) {
      // a small whole response: one buffer, one write, no writev through a corked stream
      // (chunked: the head, the one chunk and the last chunk, as the output of a Lua content hook)
      const frame = this.chunked && size ? chunkSizeLine(size) : '';
      const last = this.chunked ? (size ? '\r\n' + LAST_CHUNK : LAST_CHUNK) : '';
      const out = Buffer.allocUnsafe(this.headLength + frame.length + size + last.length);
      let at = out.write(this.takeHead()!, 0, 'latin1');
      if (frame) at += out.write(frame, at, 'latin1');
      if (size) at += chunk!.copy(out, at);
      if (last) out.write(last, at, 'latin1');
      this.ended = true;
      socket.write(out, this.written);
      this.endMark = socket.bytesWritten;
      return;
    }
    socket.cork();
    if (chunk !== undefined && chunk.length) this.write(chunk);
    this.ended = true;
    const rest = this.takeHead();
    if (rest !== undefined) socket.write(rest, 'latin1');
    let last: string | Buffer = EMPTY;
    if (this.chunked) last = this.trailers ? chunkSizeLine(0) + trailerLines(this.trailers) + '\r\n' : LAST_CHUNK;
    socket.write(last, 'latin1', this.written);
    socket.uncork();
    this.endMark = socket.bytesWritten;
  }

  holdFinish(until: Promise<unknown>): void {
    if (this.finished) return;
    this.finishHold = this.finishHold ? Promise.all([this.finishHold, until]) : until;
  }

  /** The last write reached the socket. */
  private written = (err?: Error | null): void => {
    if (err || this.destroyed) return;
    const hold = this.finishHold;
    if (hold) {
      this.finishHold = undefined;
      void hold.then(() => this.written());
      return;
    }
    this.finished = true;
    this.fireFinish();
    // as node:http did: the next request may start before this one is logged
    process.nextTick(() => this.fireClose());
  };

  abort(): void {
    // a finished response no longer owns the connection (it may carry the next request)
    if (this.destroyed || this.finished) return;
    this.destroyed = true;
    if (this.endMark < 0) this.endMark = this.socket.bytesWritten;
    this.socket.destroy();
  }

  /** The connection's socket drained. */
  socketDrained(): void {
    if (!this.finished) this.fireDrain();
  }

  /** The connection closed (or the request was only logged): the response is over. */
  socketClosed(): void {
    if (!this.finished) {
      this.destroyed = true;
      if (this.endMark < 0) this.endMark = this.socket.bytesWritten;
    }
    this.fireClose();
  }

  get bytesSent(): number {
    const end = this.endMark >= 0 ? this.endMark : this.socket.bytesWritten;
    return Math.max(0, end - this.startMark);
  }

  get bodyBytesSent(): number {
    return Math.max(0, this.bytesSent - (this.headWritten ? this.headLength : 0));
  }
}

/**
 * The client socket as a body sink, past the response's framing: an
 * HTTP/0.9 answer relayed as is; its end is the connection's end.
 */
export function rawSocketSink(socket: Socket): BodySink {
  let ended = false;
  return {
    write: (chunk) => socket.write(chunk),
    end(chunk) {
      ended = true;
      if (chunk !== undefined) socket.end(chunk);
      else socket.end();
    },
    onceDrain: (fn) => { socket.once('drain', fn); },
    get destroyed() { return socket.destroyed; },
    get ended() { return ended; },
  };
}

/** `name: value` lines of a trailer section, each ended by CRLF. */
function trailerLines(list: string[]): string {
  let lines = '';
  for (let i = 0; i < list.length; i += 2) lines += `${list[i]}: ${list[i + 1]}\r\n`;
  return lines;
}

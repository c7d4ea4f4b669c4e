/**
 * The HTTP/2 response sink: the head as one HEADERS frame, the body as DATA
 * on the stream, trailers (or an empty end) when the body is done, as
 * nginx's HTTP/2 layer sends them:
 * - connection-specific headers are never sent (Connection, Keep-Alive,
 *   Transfer-Encoding, Upgrade, and TE other than `trailers`);
 * - the stream counts its own bytes ($bytes_sent, $body_bytes_sent): the
 *   socket is shared by every stream, so its counter says nothing about one;
 * - DATA frames are http2_chunk_size long (nghttp2 fills a frame with all a
 *   stream has queued, so the body is handed over one such piece at a time,
 *   the next once the last went out); a body that fits one piece goes out
 *   with END_STREAM on its DATA frame unless trailers may follow
 *   (add_trailer), as in nginx. (After several pieces node:http2 ends the
 *   stream only once the last one went out: an empty DATA frame then
 *   carries END_STREAM.)
 */
import { EventEmitter } from 'node:events';
import http2 from 'node:http2';
import type { ServerHttp2Stream } from 'node:http2';
import { SinkListeners } from '../response-sink.ts';
import type { ResponseSink } from '../response-sink.ts';
import { fieldSize, FRAME_HEADER_SIZE } from './wire-size.ts';

/** Body bytes a response may queue beyond the piece with the stream before its writer is told to wait. */
const QUEUE_LIMIT = 64 * 1024;

const CONNECTION_HEADERS = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/**
 * The client as a stream's request sees it: END_STREAM is no FIN (a request
 * ends its body so), only a reset or the connection's end is the client
 * going away ('close').
 */
class StreamClient extends EventEmitter {
  readonly readableEnded = false;
}

export class Http2Sink extends SinkListeners implements ResponseSink {
  readonly stream: ServerHttp2Stream;
  readonly socket = null;
  /** Body bytes handed to the stream. */
  private bodyBytes = 0;
  /** Size of the HEADERS frame (an estimate, see wire-size.ts); 0 until the head is sent. */
  private headFrameBytes = 0;
  /** Body bytes the stream still held when it was reset (whole writes: node:http2 tells no finer). */
  unsentBytes = 0;
  /** The stream was reset from this side (an aborted response), not by the client. */
  resetHere = false;
  private trailers: string[] | undefined;
  private noBody = false;
  private headRequest: boolean;
  private readonly chunkSize: () => number;
  /** Body bytes not yet handed to the stream; a piece is with the stream; end() was called. */
  private queued: Buffer[] = [];
  private queuedBytes = 0;
  private writing = false;
  private ending = false;
  private wantsDrain = false;
  /** Trailers may follow the body: the stream waits for them instead of ending with the last DATA. */
  private trailersExpected = false;
  private streamFinished = false;
  headersSent = false;
  ended = false;
  finished = false;

  constructor(stream: ServerHttp2Stream, headRequest: boolean, chunkSize: () => number) {
    super();
    this.stream = stream;
    this.headRequest = headRequest;
    this.chunkSize = chunkSize;
    // (a HEAD response, 204 and 304 end the stream with the head)
    stream.once('finish', () => {
      this.streamFinished = true;
      if (this.ended) this.markFinished();
    });
    stream.on('wantTrailers', () => this.sendTrailers());
  }

  readonly client = new StreamClient();

  setHeadOnly(on: boolean): void {
    this.headRequest = on;
  }

  get destroyed(): boolean {
    return this.stream.destroyed && !this.finished;
  }

  sendHead(status: number, _reason: string, headers: string[]): void {
    if (this.headersSent) return;
    this.headersSent = true;
    const out: Record<string, string | string[] | number> = { ':status': status };
    let size = FRAME_HEADER_SIZE + fieldSize(':status', String(status));
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i].toLowerCase();
      const value = headers[i + 1];
      if (CONNECTION_HEADERS.has(name) || (name === 'te' && value.toLowerCase() !== 'trailers')) continue;
      const had = out[name];
      if (had === undefined) out[name] = value;
      else if (Array.isArray(had)) had.push(value);
      else out[name] = [had as string, value];
      size += fieldSize(name, value);
    }
    this.headFrameBytes = size;
    this.noBody = this.headRequest || status === 204 || status === 205 || status === 304;
    if (this.stream.destroyed || this.stream.closed) return;
    // (sendDate: node:http2 would add a Date; nginx's is in the list)
    this.stream.respond(out, { waitForTrailers: this.trailersExpected, sendDate: false } as http2.ServerStreamResponseOptions);
  }

  expectTrailers(): void {
    this.trailersExpected = true;
  }

  flushHead(): void {}
  writeContinue(): void {}

  setTrailers(trailers: string[]): void {
    this.trailers = trailers;
  }

  private sendTrailers(): void {
    const out: Record<string, string> = {};
    const list = this.trailers;
    if (list) for (let i = 0; i < list.length; i += 2) out[list[i].toLowerCase()] = list[i + 1];
    if (!this.stream.destroyed) this.stream.sendTrailers(out);
  }

  write(chunk: Buffer): boolean {
    const stream = this.stream;
    if (this.ended || stream.destroyed || this.noBody || chunk.length === 0) return true;
    this.bodyBytes += chunk.length;
    this.queued.push(chunk);
    this.queuedBytes += chunk.length;
    this.schedule();
    if (this.queuedBytes < QUEUE_LIMIT) return true;
    this.wantsDrain = true;
    return false;
  }

  end(chunk?: Buffer): void {
    if (this.ended) return;
    this.ended = true;
    if (this.streamFinished) {
      this.markFinished();
      return;
    }
    if (this.stream.destroyed) return;
    if (chunk !== undefined && chunk.length && !this.noBody) {
      this.bodyBytes += chunk.length;
      this.queued.push(chunk);
      this.queuedBytes += chunk.length;
    }
    this.ending = true;
    this.schedule();
  }

  /** The pump runs once what this turn writes is queued: what goes out together shares its frames, as one nginx output chain. */
  private schedule(): void {
    if (this.writing) return;
    this.writing = true;
    queueMicrotask(this.pump);
  }

  /** Hands the stream its next piece of body (the last one with the end), when the one before went out. */
  private readonly pump = (): void => {
    this.writing = false;
    const stream = this.stream;
    if (stream.destroyed || stream.writableEnded) return;
    if (this.queuedBytes === 0) {
      if (this.ending) stream.end();
      return;
    }
    const piece = this.take(Math.max(1, this.chunkSize()));
    if (this.wantsDrain && this.queuedBytes < QUEUE_LIMIT) {
      this.wantsDrain = false;
      this.fireDrain();
    }
    if (this.ending && this.queuedBytes === 0) {
      stream.end(piece);
      return;
    }
    this.writing = true;
    stream.write(piece, this.pump);
  };

  private take(size: number): Buffer {
    const first = this.queued[0];
    if (first.length > size) {
      this.queued[0] = first.subarray(size);
      this.queuedBytes -= size;
      return first.subarray(0, size);
    }
    const parts: Buffer[] = [];
    let n = 0;
    while (this.queued.length && n + this.queued[0].length <= size) {
      const b = this.queued.shift()!;
      parts.push(b);
      n += b.length;
    }
    if (n < size && this.queued.length) {
      const b = this.queued[0];
      parts.push(b.subarray(0, size - n));
      this.queued[0] = b.subarray(size - n);
      n = size;
    }
    this.queuedBytes -= n;
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }

  private markFinished(): void {
    this.finished = true;
    this.fireFinish();
  }

  abort(): void {
    if (this.stream.destroyed) return;
    this.resetHere = true;
    this.stream.destroy();
  }

  /** `$body_bytes_sent`: DATA payload sent. */
  get bodyBytesSent(): number {
    return Math.max(0, this.bodyBytes - this.unsentBytes);
  }

  /** `$bytes_sent`: every frame of the stream, 9-byte frame headers included. */
  get bytesSent(): number {
    if (this.headFrameBytes === 0) return 0;
    const body = this.bodyBytesSent;
    // (DATA frames of http2_chunk_size, within the peer's frame size and node:http2's 16k)
    const frameSize = Math.min(Math.max(1, this.chunkSize()), this.stream.session?.remoteSettings.maxFrameSize ?? 16384, 16384);
    return this.headFrameBytes + body + FRAME_HEADER_SIZE * Math.ceil(body / frameSize);
  }

  /** The stream closed: reset by either side, or done. */
  streamClosed(): void {
    const stream = this.stream;
    if (stream.rstCode !== undefined && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) this.unsentBytes = stream.bufferSize + this.queuedBytes;
    if (!this.finished) this.client.emit('close');
    this.fireClose();
  }
}

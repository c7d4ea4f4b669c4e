/**
 * The HTTP/2 response sink: the head as one HEADERS frame, the body as DATA
 * on the stream, trailers (or an empty end) when the body is done, as
 * nginx's HTTP/2 layer sends them:
 * - connection-specific headers are never sent (Connection, Keep-Alive,
 *   Transfer-Encoding, Upgrade, and TE other than `trailers`);
 * - the stream counts its own bytes ($bytes_sent, $body_bytes_sent): the
 *   socket is shared by every stream, so its counter says nothing about one.
 */
import { EventEmitter } from 'node:events';
import http2 from 'node:http2';
import type { ServerHttp2Stream } from 'node:http2';
import { SinkListeners } from '../response-sink.ts';
import type { ResponseSink } from '../response-sink.ts';
import { fieldSize, FRAME_HEADER_SIZE } from './wire-size.ts';

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
  private readonly headRequest: boolean;
  private streamFinished = false;
  headersSent = false;
  ended = false;
  finished = false;

  constructor(stream: ServerHttp2Stream, headRequest: boolean) {
    super();
    this.stream = stream;
    this.headRequest = headRequest;
    stream.on('drain', () => this.fireDrain());
    // (a HEAD response, 204 and 304 end the stream with the head)
    stream.once('finish', () => {
      this.streamFinished = true;
      if (this.ended) this.markFinished();
    });
    stream.on('wantTrailers', () => this.sendTrailers());
  }

  readonly client = new StreamClient();

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
    this.stream.respond(out, { waitForTrailers: true, sendDate: false } as http2.ServerStreamResponseOptions);
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
    return stream.write(chunk);
  }

  end(chunk?: Buffer): void {
    if (this.ended) return;
    this.ended = true;
    const stream = this.stream;
    if (this.streamFinished) {
      this.markFinished();
      return;
    }
    if (stream.destroyed) return;
    if (chunk !== undefined && chunk.length && !this.noBody) {
      this.bodyBytes += chunk.length;
      stream.end(chunk);
    } else {
      stream.end();
    }
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
    const frameSize = this.stream.session?.remoteSettings.maxFrameSize ?? 16384;
    return this.headFrameBytes + body + FRAME_HEADER_SIZE * Math.ceil(body / frameSize);
  }

  /** The stream closed: reset by either side, or done. */
  streamClosed(): void {
    const stream = this.stream;
    if (stream.rstCode !== undefined && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) this.unsentBytes = stream.bufferSize;
    if (!this.finished) this.client.emit('close');
    this.fireClose();
  }
}

/**
 * A request body as it arrives on an HTTP/1.x connection: its framing
 * (Content-Length, or chunked with nginx's rules, src/http/chunked.ts) says
 * which bytes are the body, handed on decoded, and where the next request's
 * head begins.
 */
import { CHUNKED_AGAIN, CHUNKED_ERROR, ChunkedDecoder } from './chunked.ts';

/** consume(): the chunked framing is broken (nginx's "client sent invalid chunked body"). */
export const BODY_INVALID = -1;

export class BodyFraming {
  /** Bytes of a Content-Length body still to come. */
  private remaining: number;
  private readonly decoder: ChunkedDecoder | undefined;
  done: boolean;
  /** Body bytes decoded so far. */
  private decoded = 0;

  constructor(contentLength: number, chunked: boolean) {
    this.decoder = chunked ? new ChunkedDecoder(false) : undefined;
    this.remaining = chunked ? 0 : Math.max(0, contentLength);
    this.done = !chunked && this.remaining === 0;
  }

  /**
   * Takes body bytes from the start of `b`, pushing the body's data (slices
   * of `b`) to `out`; returns where the body ended, `b.length` when it goes
   * on, or BODY_INVALID.
   */
  /**
   * A chunked body's chunk whose data is still arriving: the body bytes
   * before it and its announced size (nginx checks client_max_body_size
   * against both as soon as it reads a chunk's size).
   */
  get pendingChunk(): { before: number; size: number } | undefined {
    const d = this.decoder;
    if (d === undefined || d.dataLeft === 0) return undefined;
    return { before: this.decoded - (d.chunkSize - d.dataLeft), size: d.chunkSize };
  }

  consume(b: Buffer, out: Buffer[]): number {
    if (this.done) return 0;
    if (this.decoder === undefined) {
      const n = Math.min(this.remaining, b.length);
      if (n > 0) out.push(n === b.length ? b : b.subarray(0, n));
      this.remaining -= n;
      if (this.remaining === 0) this.done = true;
      return n;
    }
    const had = out.length;
    const rc = this.decoder.feed(b, 0, out);
    for (let i = had; i < out.length; i++) this.decoded += out[i].length;
    if (rc === CHUNKED_ERROR) return BODY_INVALID;
    if (rc === CHUNKED_AGAIN) return b.length;
    this.done = true;
    return rc;
  }
}

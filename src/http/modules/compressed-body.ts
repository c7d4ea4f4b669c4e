/**
 * The body half of a compressing filter (gzip's, brotli's): one zlib
 * stream per response, with the format's own framing around it (gzip's
 * header and trailer; brotli has none). zlib works off the thread, so the
 * filter holds bytes of its own: it asks the writer to wait while the
 * stream's input is full, and pauses the stream's output while the filters
 * after it are busy. Output goes on in buffers of `bufferSize` (nginx's
 * gzip fills its gzip_buffers before passing them on; 0: as it comes), the
 * header with the first and the trailer with the last. With `flushKind`,
 * an empty chunk that is not the end (nginx's flush buffer) flushes the
 * stream, and what it gave goes on at once.
 */
import type zlib from 'node:zlib';
import { nextBodyFilter, resumeBody } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import type { HttpRequest } from '../request.ts';

/** What a format adds around the compressed stream. */
export interface Framing {
  header?: Buffer;
  /** Sees every input chunk (gzip's CRC). */
  input?(chunk: Buffer): void;
  trailer?(): Buffer;
}

export interface CompressOptions {
  bufferSize: number;
  /** zlib's flush kind for nginx's flush buffer (BROTLI_OPERATION_FLUSH); none: an empty chunk is nothing. */
  flushKind?: number;
  /** Flush after every chunk (APISIX's brotli plugin: compress, then flush, each piece). */
  flushEach?: boolean;
}

export class CompressedBody {
  private readonly r: HttpRequest;
  private readonly self: BodyFilterEntry;
  private readonly engine: zlib.DeflateRaw | zlib.BrotliCompress;
  private readonly framing: Framing;
  private readonly opts: CompressOptions;
  /** Output not yet passed on (the header first), and its length. */
  private pending: Buffer[];
  private pendingLength: number;
  /** Bytes in, and bytes out with header and trailer (the *_ratio variables, once finished). */
  zin = 0;
  zout = 0;
  finished = false;
  /** The filters after this one asked to wait: the stream's output is paused. */
  private blocked = false;
  /** The stream's input is full: the writers wait for its 'drain'. */
  private full = false;

  constructor(r: HttpRequest, self: BodyFilterEntry, engine: zlib.DeflateRaw | zlib.BrotliCompress, framing: Framing, opts: CompressOptions) {
    this.r = r;
    this.self = self;
    this.engine = engine;
    this.framing = framing;
    this.opts = opts;
    this.pending = framing.header ? [framing.header] : [];
    this.pendingLength = framing.header?.length ?? 0;
    this.zout = this.pendingLength;
    engine.on('data', (out: Buffer) => this.output(out));
    engine.on('end', () => this.finish());
    engine.on('drain', () => this.inputDrained());
    engine.on('error', () => this.r.sink.abort());
  }

  /** The filter: the body goes into the stream. */
  write(chunk: Buffer, eof: boolean): boolean {
    if (chunk.length) {
      this.framing.input?.(chunk);
      this.zin += chunk.length;
      if (!this.engine.write(chunk)) this.full = true;
    }
    if (eof) this.engine.end();
    else if (this.opts.flushKind !== undefined && (chunk.length === 0 || this.opts.flushEach)) this.engine.flush(this.opts.flushKind, () => this.passPending());
    return !this.full && !this.blocked;
  }

  /** The filters after this one can take more. */
  resume(): boolean {
    if (this.blocked) {
      this.blocked = false;
      this.engine.resume();
    }
    return !this.full;
  }

  private output(out: Buffer): void {
    this.zout += out.length;
    this.pending.push(out);
    this.pendingLength += out.length;
    if (this.pendingLength >= this.opts.bufferSize) this.passPending();
  }

  /** What is held goes on (a full buffer, or what a flush gave). */
  private passPending(): void {
    if (this.pendingLength === 0 || this.finished) return;
    if (!nextBodyFilter(this.r, this.self, this.takePending(), false) && !this.blocked) {
      this.blocked = true;
      this.engine.pause();
    }
  }

  private takePending(): Buffer {
    const out = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.pendingLength);
    this.pending = [];
    this.pendingLength = 0;
    return out;
  }

  private inputDrained(): void {
    this.full = false;
    if (!this.blocked) resumeBody(this.r, this.self);
  }

  private finish(): void {
    const trailer = this.framing.trailer?.();
    if (trailer) {
      this.zout += trailer.length;
      this.pending.push(trailer);
      this.pendingLength += trailer.length;
    }
    this.finished = true;
    nextBodyFilter(this.r, this.self, this.takePending(), true);
  }
}

/** nginx's `*_ratio` variables: bytes in over bytes out, two decimals rounded as nginx rounds. */
export function compressionRatio(body: CompressedBody | undefined): string | undefined {
  if (!body?.finished || body.zout === 0) return undefined;
  const { zin, zout } = body;
  let int = Math.floor(zin / zout);
  let frac = Math.floor((zin * 100) / zout) % 100;
  if (Math.floor((zin * 1000) / zout) % 10 > 4) {
    frac++;
    if (frac > 99) { int++; frac = 0; }
  }
  return `${int}.${String(frac).padStart(2, '0')}`;
}

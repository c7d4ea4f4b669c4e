/**
 * The body half of the gzip filter (ngx_http_gzip_body_filter): a raw
 * deflate stream per response, wrapped in nginx's own gzip header and
 * trailer. zlib works off the thread, so this filter holds bytes of its
 * own: it asks the writer to wait while deflate's input is full, and pauses
 * deflate's output while the filters after it are busy. As nginx's filter
 * fills its gzip_buffers before passing them on, output goes on in buffers
 * of `bufferSize`, the header with the first and the trailer with the last:
 * a small response is one chunk (nginx-tests' proxy_cache.t reads it so).
 */
import zlib from 'node:zlib';
import { nextBodyFilter, resumeBody } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import type { HttpRequest } from '../request.ts';

/** The gzip header zlib writes for nginx (deflateInit2 with wbits + 16): no mtime, OS unix, XFL by level. */
function gzipHeader(level: number): Buffer {
  return Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, level === 9 ? 2 : level < 2 ? 4 : 0, 3]);
}

/** r.ctx key of a response's GzipBody. */
export const GZIP_BODY = {};

export class GzipBody {
  private readonly r: HttpRequest;
  private readonly self: BodyFilterEntry;
  private readonly deflate: zlib.DeflateRaw;
  private crc = 0;
  /** Output not yet passed on (the header first), and its length. */
  private pending: Buffer[];
  private pendingLength = 10;
  private readonly bufferSize: number;
  /** Bytes in, and bytes out with header and trailer ($gzip_ratio, once finished). */
  zin = 0;
  zout = 0;
  finished = false;
  /** The filters after this one asked to wait: deflate's output is paused. */
  private blocked = false;
  /** deflate's input is full: the writers wait for its 'drain'. */
  private full = false;

  constructor(r: HttpRequest, self: BodyFilterEntry, level: number, windowBits: number, memLevel: number, bufferSize: number) {
    this.r = r;
    this.self = self;
    this.pending = [gzipHeader(level)];
    this.bufferSize = bufferSize;
    const deflate = zlib.createDeflateRaw({ level, windowBits, memLevel });
    this.deflate = deflate;
    deflate.on('data', (out: Buffer) => this.output(out));
    deflate.on('end', () => this.finish());
    deflate.on('drain', () => this.inputDrained());
    deflate.on('error', () => this.r.sink.abort());
  }

  /** The filter: the body goes into deflate. */
  write(chunk: Buffer, eof: boolean): boolean {
    if (chunk.length) {
      this.crc = zlib.crc32(chunk, this.crc);
      this.zin += chunk.length;
      if (!this.deflate.write(chunk)) this.full = true;
    }
    if (eof) this.deflate.end();
    return !this.full && !this.blocked;
  }

  /** The filters after this one can take more. */
  resume(): boolean {
    if (this.blocked) {
      this.blocked = false;
      this.deflate.resume();
    }
    return !this.full;
  }

  private output(out: Buffer): void {
    this.zout += out.length;
    this.pending.push(out);
    this.pendingLength += out.length;
    if (this.pendingLength < this.bufferSize) return;
    if (!nextBodyFilter(this.r, this.self, this.takePending(), false) && !this.blocked) {
      this.blocked = true;
      this.deflate.pause();
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
    const trailer = Buffer.allocUnsafe(8);
    trailer.writeUInt32LE(this.crc >>> 0, 0);
    trailer.writeUInt32LE(this.zin >>> 0, 4);
    this.zout += 18;
    this.finished = true;
    this.pending.push(trailer);
    this.pendingLength += trailer.length;
    nextBodyFilter(this.r, this.self, this.takePending(), true);
  }
}

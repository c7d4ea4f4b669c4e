/**
 * The body half of the gzip filter (ngx_http_gzip_body_filter): a raw
 * deflate stream per response, wrapped in nginx's own gzip header and
 * trailer. zlib works off the thread, so this filter holds bytes of its
 * own: it asks the writer to wait while deflate's input is full, and pauses
 * deflate's output while the filters after it are busy.
 */
import zlib from 'node:zlib';
import { nextBodyFilter, resumeBody } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import type { HttpRequest } from '../request.ts';

/** nginx's gzip header: no mtime, no extra flags, OS unix. */
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]);

/** r.ctx key of a response's GzipBody. */
export const GZIP_BODY = {};

export class GzipBody {
  private readonly r: HttpRequest;
  private readonly self: BodyFilterEntry;
  private readonly deflate: zlib.DeflateRaw;
  private crc = 0;
  private headerSent = false;
  /** Bytes in, and bytes out with header and trailer ($gzip_ratio, once finished). */
  zin = 0;
  zout = 0;
  finished = false;
  /** The filters after this one asked to wait: deflate's output is paused. */
  private blocked = false;
  /** deflate's input is full: the writers wait for its 'drain'. */
  private full = false;

  constructor(r: HttpRequest, self: BodyFilterEntry, level: number, windowBits: number, memLevel: number) {
    this.r = r;
    this.self = self;
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
    if (!this.headerSent) {
      this.headerSent = true;
      nextBodyFilter(this.r, this.self, GZIP_HEADER, false);
    }
    this.zout += out.length;
    if (!nextBodyFilter(this.r, this.self, out, false) && !this.blocked) {
      this.blocked = true;
      this.deflate.pause();
    }
  }

  private inputDrained(): void {
    this.full = false;
    if (!this.blocked) resumeBody(this.r, this.self);
  }

  private finish(): void {
    if (!this.headerSent) {
      this.headerSent = true;
      nextBodyFilter(this.r, this.self, GZIP_HEADER, false);
    }
    const trailer = Buffer.allocUnsafe(8);
    trailer.writeUInt32LE(this.crc >>> 0, 0);
    trailer.writeUInt32LE(this.zin >>> 0, 4);
    this.zout += 18;
    this.finished = true;
    nextBodyFilter(this.r, this.self, trailer, false);
    nextBodyFilter(this.r, this.self, Buffer.alloc(0), true);
  }
}

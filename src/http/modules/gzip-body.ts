/**
 * The body half of the gzip filter (ngx_http_gzip_body_filter): a raw
 * deflate stream per response (compressed-body.ts), wrapped in nginx's own
 * gzip header and trailer. As nginx's filter fills its gzip_buffers before
 * passing them on, output goes on in buffers of `bufferSize`: a small
 * response is one chunk (nginx-tests' proxy_cache.t reads it so).
 */
import zlib from 'node:zlib';
import type { BodyFilterEntry } from '../body-filter.ts';
import type { HttpRequest } from '../request.ts';
import { CompressedBody } from './compressed-body.ts';

/** The gzip header zlib writes for nginx (deflateInit2 with wbits + 16): no mtime, OS unix, XFL by level. */
function gzipHeader(level: number): Buffer {
  return Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, level === 9 ? 2 : level < 2 ? 4 : 0, 3]);
}

/** r.ctx key of a response's gzip body. */
export const GZIP_BODY = {};

export function gzipBody(r: HttpRequest, self: BodyFilterEntry, level: number, windowBits: number, memLevel: number, bufferSize: number): CompressedBody {
  let crc = 0;
  let size = 0;
  const framing = {
    header: gzipHeader(level),
    input(chunk: Buffer) {
      crc = zlib.crc32(chunk, crc);
      size += chunk.length;
    },
    trailer() {
      const trailer = Buffer.allocUnsafe(8);
      trailer.writeUInt32LE(crc >>> 0, 0);
      trailer.writeUInt32LE(size >>> 0, 4);
      return trailer;
    },
  };
  return new CompressedBody(r, self, zlib.createDeflateRaw({ level, windowBits, memLevel }), framing, { bufferSize });
}

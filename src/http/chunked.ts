/**
 * A decoder for chunked bodies with nginx's rules (ngx_http_parse_chunked),
 * for request bodies (src/http/body-framing.ts) and upstream responses
 * (src/http/upstream/response-reader.ts): hex sizes, extensions after `;`, space or tab,
 * LF or CRLF line ends, trailer lines skipped (or kept for
 * proxy_pass_trailers). Chunk data is handed out as slices of the input,
 * without copying. The encoder's two pieces of framing are here too.
 */

/** The line before a chunk of `size` bytes (its data follows, then CRLF). */
export function chunkSizeLine(size: number): string {
  return size.toString(16) + '\r\n';
}

/** The last chunk with no trailers: what ends a chunked body. */
export const LAST_CHUNK = '0\r\n\r\n';

const CHUNK_START = 0;
const CHUNK_SIZE = 1;
const CHUNK_EXTENSION = 2;
const CHUNK_EXTENSION_ALMOST_DONE = 3;
const CHUNK_DATA = 4;
const AFTER_DATA = 5;
const AFTER_DATA_ALMOST_DONE = 6;
const LAST_CHUNK_EXTENSION = 7;
const LAST_CHUNK_EXTENSION_ALMOST_DONE = 8;
const TRAILER = 9;
const TRAILER_ALMOST_DONE = 10;
const TRAILER_HEADER = 11;
const TRAILER_HEADER_ALMOST_DONE = 12;

/** feed() results besides "done at offset N". */
export const CHUNKED_ERROR = -1;
export const CHUNKED_AGAIN = -2;

const MAX_SIZE = 2 ** 52;

export class ChunkedDecoder {
  private state = CHUNK_START;
  private size = 0;
  private readonly keepTrailers: boolean;
  /** Raw trailer section (when kept). */
  trailerText = '';
  /** Size of the last chunk whose header was read. */
  chunkSize = 0;

  /** Data bytes of the current chunk still to come (0 outside a chunk's data). */
  get dataLeft(): number {
    return this.state === CHUNK_DATA ? this.size : 0;
  }

  constructor(keepTrailers: boolean) {
    this.keepTrailers = keepTrailers;
  }

  /** Bytes still expected at least (nginx's ctx->length), for buffering decisions. */
  get minRemaining(): number {
    switch (this.state) {
      case CHUNK_START: return 3;
      case CHUNK_SIZE: return 1 + (this.size ? this.size + 4 : 1);
      case CHUNK_EXTENSION: case CHUNK_EXTENSION_ALMOST_DONE: return 1 + this.size + 4;
      case CHUNK_DATA: return this.size + 4;
      case AFTER_DATA: case AFTER_DATA_ALMOST_DONE: return 4;
      case LAST_CHUNK_EXTENSION: case LAST_CHUNK_EXTENSION_ALMOST_DONE: return 2;
      case TRAILER: case TRAILER_ALMOST_DONE: return 1;
      default: return 2;
    }
  }

  /**
   * Parses `buf` from `start`, pushing chunk data slices to `out`. Returns the
   * offset just after the last chunk (the body is complete), CHUNKED_AGAIN
   * when more input is needed, or CHUNKED_ERROR.
   */
  feed(buf: Buffer, start: number, out: Buffer[]): number {
    let state = this.state;
    let pos = start;
    const end = buf.length;
    while (pos < end) {
      if (state === CHUNK_DATA) {
        const n = Math.min(this.size, end - pos);
        out.push(buf.subarray(pos, pos + n));
        pos += n;
        this.size -= n;
        if (this.size === 0) state = AFTER_DATA;
        continue;
      }
      const ch = buf[pos];
      switch (state) {
        case CHUNK_START: {
          const d = hexDigit(ch);
          if (d < 0) return this.fail();
          state = CHUNK_SIZE;
          this.size = d;
          break;
        }
        case CHUNK_SIZE: {
          if (this.size > MAX_SIZE / 16) return this.fail();
          const d = hexDigit(ch);
          if (d >= 0) { this.size = this.size * 16 + d; break; }
          if (this.size === 0) {
            if (ch === 0x0d) state = LAST_CHUNK_EXTENSION_ALMOST_DONE;
            else if (ch === 0x0a) state = TRAILER;
            else if (ch === 0x3b || ch === 0x20 || ch === 0x09) state = LAST_CHUNK_EXTENSION;
            else return this.fail();
            break;
          }
          if (ch === 0x0d) state = CHUNK_EXTENSION_ALMOST_DONE;
          else if (ch === 0x0a) { state = CHUNK_DATA; this.chunkSize = this.size; }
          else if (ch === 0x3b || ch === 0x20 || ch === 0x09) state = CHUNK_EXTENSION;
          else return this.fail();
          break;
        }
        case CHUNK_EXTENSION:
          if (ch === 0x0d) state = CHUNK_EXTENSION_ALMOST_DONE;
          else if (ch === 0x0a) { state = CHUNK_DATA; this.chunkSize = this.size; }
          break;
        case CHUNK_EXTENSION_ALMOST_DONE:
          if (ch !== 0x0a) return this.fail();
          { state = CHUNK_DATA; this.chunkSize = this.size; }
          break;
        case AFTER_DATA:
          if (ch === 0x0d) state = AFTER_DATA_ALMOST_DONE;
          else if (ch === 0x0a) state = CHUNK_START;
          else return this.fail();
          break;
        case AFTER_DATA_ALMOST_DONE:
          if (ch !== 0x0a) return this.fail();
          state = CHUNK_START;
          break;
        case LAST_CHUNK_EXTENSION:
          if (ch === 0x0d) state = LAST_CHUNK_EXTENSION_ALMOST_DONE;
          else if (ch === 0x0a) state = TRAILER;
          break;
        case LAST_CHUNK_EXTENSION_ALMOST_DONE:
          if (ch !== 0x0a) return this.fail();
          state = TRAILER;
          break;
        case TRAILER:
          if (ch === 0x0d) state = TRAILER_ALMOST_DONE;
          else if (ch === 0x0a) return this.done(pos);
          else { state = TRAILER_HEADER; this.keep(ch); }
          break;
        case TRAILER_ALMOST_DONE:
          if (ch !== 0x0a) return this.fail();
          return this.done(pos);
        case TRAILER_HEADER:
          if (ch === 0x0d) state = TRAILER_HEADER_ALMOST_DONE;
          else if (ch === 0x0a) { state = TRAILER; this.keep(0x0a); }
          else this.keep(ch);
          break;
        case TRAILER_HEADER_ALMOST_DONE:
          if (ch !== 0x0a) return this.fail();
          state = TRAILER;
          this.keep(0x0a);
          break;
      }
      pos++;
    }
    this.state = state;
    return CHUNKED_AGAIN;
  }

  private keep(ch: number): void {
    if (this.keepTrailers) this.trailerText += String.fromCharCode(ch);
  }

  private done(pos: number): number {
    this.state = CHUNK_START;
    return pos + 1;
  }

  private fail(): number {
    return CHUNKED_ERROR;
  }
}

function hexDigit(ch: number): number {
  if (ch >= 0x30 && ch <= 0x39) return ch - 0x30;
  const c = ch | 0x20;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  return -1;
}

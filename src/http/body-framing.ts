/**
 * Where a request body ends in the byte stream, so the connection knows
 * which bytes are llhttp's (the body) and where the next request's head
 * begins. llhttp parses and checks the body itself; this only follows the
 * framing (Content-Length, or chunk sizes and the trailer section) of a
 * body llhttp accepts, and the connection verifies that llhttp finished the
 * message exactly there — any disagreement closes the connection.
 */

const SIZE = 0;
const EXTENSION = 1;
const DATA = 2;
const DATA_END = 3;
const TRAILER_START = 4;
const TRAILER_LINE = 5;
const LAST_LF = 6;

export class BodyFraming {
  /** Bytes of body (or of the current chunk's data) still to come. */
  private remaining: number;
  private readonly chunked: boolean;
  private state = SIZE;
  private size = 0;
  private digits = 0;
  done: boolean;

  constructor(contentLength: number, chunked: boolean) {
    this.chunked = chunked;
    this.remaining = chunked ? 0 : Math.max(0, contentLength);
    this.done = !chunked && this.remaining === 0;
  }

  /** Takes body bytes from b[start..end); returns where the body ended, or `end` when it goes on. */
  consume(b: Buffer, start: number, end: number): number {
    if (this.done) return start;
    if (!this.chunked) {
      const n = Math.min(this.remaining, end - start);
      this.remaining -= n;
      if (this.remaining === 0) this.done = true;
      return start + n;
    }
    let p = start;
    while (p < end) {
      const ch = b[p];
      switch (this.state) {
        case SIZE: {
          const v = hexDigit(ch);
          if (v >= 0 && this.digits < 16) {
            this.size = this.size * 16 + v;
            this.digits++;
            p++;
            break;
          }
          this.state = EXTENSION;
          break;
        }
        case EXTENSION: {
          // chunk extensions run to the end of the line
          const lf = b.indexOf(10, p);
          if (lf < 0 || lf >= end) return end;
          p = lf + 1;
          if (this.size === 0) {
            this.state = TRAILER_START;
          } else {
            this.remaining = this.size;
            this.state = DATA;
          }
          this.size = 0;
          this.digits = 0;
          break;
        }
        case DATA: {
          const n = Math.min(this.remaining, end - p);
          this.remaining -= n;
          p += n;
          if (this.remaining === 0) this.state = DATA_END;
          break;
        }
        case DATA_END: {
          const lf = b.indexOf(10, p);
          if (lf < 0 || lf >= end) return end;
          p = lf + 1;
          this.state = SIZE;
          break;
        }
        case TRAILER_START:
          if (ch === 13) { this.state = LAST_LF; p++; break; }
          if (ch === 10) { this.done = true; return p + 1; }
          this.state = TRAILER_LINE;
          break;
        case TRAILER_LINE: {
          const lf = b.indexOf(10, p);
          if (lf < 0 || lf >= end) return end;
          p = lf + 1;
          this.state = TRAILER_START;
          break;
        }
        case LAST_LF:
          this.done = true;
          return p + 1;
      }
    }
    return end;
  }
}

function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x57 : -1;
}

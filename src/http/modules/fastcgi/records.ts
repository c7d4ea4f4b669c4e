/**
 * FastCGI's wire format (version 1), as nginx speaks it: every record has
 * an 8-byte header (version, type, request id 1, content length, padding
 * length) and content padded to a multiple of 8. The request is
 * BEGIN_REQUEST (responder role, KEEP_CONN with fastcgi_keep_conn), the
 * params as name-value pairs in PARAMS records closed by an empty one,
 * then the body in STDIN records closed by an empty one. The response is
 * STDOUT and STDERR records, then END_REQUEST.
 */
import type { BodyFraming } from '../../upstream/send-body.ts';

export const BEGIN_REQUEST = 1;
export const END_REQUEST = 3;
export const PARAMS = 4;
export const STDIN = 5;
export const STDOUT = 6;
export const STDERR = 7;

/** Content bytes in one record (under the 65535 the length field allows, a multiple of 8). */
const MAX_CONTENT = 32768;

function header(type: number, length: number, padding: number): Buffer {
  const h = Buffer.alloc(8);
  h[0] = 1;
  h[1] = type;
  h[3] = 1;
  h.writeUInt16BE(length, 4);
  h[6] = padding;
  return h;
}

const PADDING = Buffer.alloc(8);

/** One record (header, content, padding); `content` is at most 65535 bytes. */
export function record(type: number, content: Buffer): Buffer[] {
  const pad = (8 - (content.length & 7)) & 7;
  const out = [header(type, content.length, pad)];
  if (content.length) out.push(content);
  if (pad) out.push(PADDING.subarray(0, pad));
  return out;
}

export function beginRequest(keepConn: boolean): Buffer {
  const b = Buffer.alloc(16);
  b[0] = 1;
  b[1] = BEGIN_REQUEST;
  b[3] = 1;
  b[5] = 8;
  b[9] = 1; // role: responder
  b[10] = keepConn ? 1 : 0;
  return b;
}

function lengthBytes(n: number): string {
  if (n < 128) return String.fromCharCode(n);
  return String.fromCharCode(((n >>> 24) & 0x7f) | 0x80, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}

/** The name-value pairs of a flat name, value list, as a latin1 string. */
export function encodePairs(params: string[]): string {
  let s = '';
  for (let i = 0; i < params.length; i += 2) {
    s += lengthBytes(params[i].length) + lengthBytes(params[i + 1].length) + params[i] + params[i + 1];
  }
  return s;
}

/** The body in STDIN records, closed by the empty one. */
export const STDIN_FRAMING: BodyFraming = {
  frame(data) {
    const out: Buffer[] = [];
    for (let at = 0; at < data.length; at += MAX_CONTENT) out.push(...record(STDIN, data.subarray(at, at + MAX_CONTENT)));
    return out;
  },
  end: Buffer.concat(record(STDIN, Buffer.alloc(0))),
};

/** What a RecordReader reports. */
export interface RecordSink {
  stdout(b: Buffer): void;
  stderr(b: Buffer): void;
  /** END_REQUEST: the response is complete. */
  end(): void;
  /** A record nginx would not accept: the message to log. */
  bad(message: string): void;
}

/**
 * Splits response bytes into records as they arrive (records may straddle
 * reads). STDOUT and STDERR content is reported piece by piece.
 */
export class RecordReader {
  private readonly head = Buffer.alloc(8);
  private headGot = 0;
  private type = 0;
  /** Content bytes of the current record not read yet, then its padding. */
  contentLeft = 0;
  private paddingLeft = 0;
  private inRecord = false;
  done = false;
  private failed = false;

  /** Reads `b` from `from`; stops early when the sink asks (`stop` returns true) or at the end. Returns where it stopped. */
  feed(b: Buffer, from: number, sink: RecordSink, stop: () => boolean = () => false): number {
    let i = from;
    while (i < b.length && !this.done && !this.failed) {
      if (!this.inRecord) {
        const n = Math.min(8 - this.headGot, b.length - i);
        b.copy(this.head, this.headGot, i, i + n);
        this.headGot += n;
        i += n;
        if (this.headGot < 8) break;
        this.headGot = 0;
        if (this.head[0] !== 1) { this.failed = true; sink.bad(`upstream sent unsupported FastCGI protocol version: ${this.head[0]}`); break; }
        this.type = this.head[1];
        this.contentLeft = this.head.readUInt16BE(4);
        this.paddingLeft = this.head[6];
        this.inRecord = true;
        if (this.type !== STDOUT && this.type !== STDERR && this.type !== END_REQUEST) {
          this.failed = true;
          sink.bad(`upstream sent unexpected FastCGI record: ${this.type}`);
          break;
        }
        if (this.contentLeft === 0 && this.type === STDOUT) sink.stdout(b.subarray(i, i));
      }
      if (this.contentLeft > 0) {
        // the content comes with a later read
        if (i === b.length) break;
        const n = Math.min(this.contentLeft, b.length - i);
        const piece = b.subarray(i, i + n);
        this.contentLeft -= n;
        i += n;
        if (this.type === STDOUT) sink.stdout(piece);
        else if (this.type === STDERR) sink.stderr(piece);
        if (stop()) return i;
        if (this.contentLeft > 0) break;
      }
      const p = Math.min(this.paddingLeft, b.length - i);
      this.paddingLeft -= p;
      i += p;
      if (this.paddingLeft > 0) break;
      this.inRecord = false;
      if (this.type === END_REQUEST) {
        this.done = true;
        sink.end();
      }
    }
    return i;
  }
}

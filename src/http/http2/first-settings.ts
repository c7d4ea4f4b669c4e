/**
 * Clients that acknowledge the server's SETTINGS before sending their own.
 *
 * RFC 9113 3.4 wants a client's preface to be followed by a SETTINGS frame,
 * and nghttp2 (under node:http2) ends the connection with GOAWAY
 * PROTOCOL_ERROR when the first frame is anything else. nginx takes any
 * frame there, and some clients rely on it: nginx's own test client sends
 * the preface, waits for the server's SETTINGS and answers with a SETTINGS
 * ACK before (if ever) sending a SETTINGS of its own.
 *
 * For such a client the connection runs through a Duplex that puts an empty
 * SETTINGS frame (one that changes nothing) in front of the client's first
 * frame, and takes the SETTINGS ACK nghttp2 answers it with out of what it
 * sends, so the client sees exactly the frames nginx would send it. Clients
 * whose first frame is already in hand and is a SETTINGS (every real one:
 * they send it with the preface) keep the socket to node:http2 directly.
 */
import { Duplex } from 'node:stream';
import type { Socket } from 'node:net';

const PREFACE_SIZE = 24;
const FRAME_HEADER_SIZE = 9;
const SETTINGS = 0x4;
const ACK = 0x1;
const EMPTY_SETTINGS = Buffer.from([0, 0, 0, SETTINGS, 0, 0, 0, 0, 0]);

/** true: the first frame after the preface is a SETTINGS; false: another; undefined: not read yet. */
export function startsWithSettings(bytes: Buffer): boolean | undefined {
  if (bytes.length < PREFACE_SIZE + FRAME_HEADER_SIZE) return undefined;
  return bytes[PREFACE_SIZE + 3] === SETTINGS && (bytes[PREFACE_SIZE + 4] & ACK) === 0;
}

/**
 * The socket as node:http2 sees it when the client's first frame is not
 * known to be a SETTINGS: `head` (bytes already read from the socket) comes
 * first, then what the socket reads.
 */
export class FirstSettingsShim extends Duplex {
  private readonly socket: Socket;
  /** Client bytes held until the first frame's header is in (undefined once passed on). */
  private held: Buffer | undefined;
  /** Outgoing: a SETTINGS ACK is to be taken out; the frame-header bytes of a partial header. */
  private dropAck = false;
  private partialHeader: Buffer | undefined;
  /** Outgoing: payload bytes of the current frame still to pass. */
  private payloadLeft = 0;

  constructor(socket: Socket, head: Buffer) {
    super({ allowHalfOpen: true });
    this.socket = socket;
    this.held = Buffer.alloc(0);
    this.fromClient(head);
    socket.on('data', (chunk: Buffer) => this.fromClient(chunk));
    socket.once('end', () => {
      if (this.held) this.passOn(this.held);
      this.push(null);
    });
    socket.once('close', () => this.destroy());
    socket.on('error', (err) => this.destroy(err));
  }

  private fromClient(chunk: Buffer): void {
    if (!this.held) return this.passOn(chunk);
    const bytes = this.held.length ? Buffer.concat([this.held, chunk]) : chunk;
    const settingsFirst = startsWithSettings(bytes);
    if (settingsFirst === undefined) {
      this.held = bytes;
      return;
    }
    this.held = undefined;
    if (!settingsFirst) {
      this.dropAck = true;
      this.passOn(Buffer.concat([bytes.subarray(0, PREFACE_SIZE), EMPTY_SETTINGS, bytes.subarray(PREFACE_SIZE)]));
    } else {
      this.passOn(bytes);
    }
  }

  private passOn(chunk: Buffer): void {
    if (chunk.length && !this.push(chunk)) this.socket.pause();
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    const out = this.dropAck ? this.withoutAck(chunk) : chunk;
    if (out.length === 0 || this.socket.write(out)) done();
    else this.socket.once('drain', () => done());
  }

  /** Walks the frames going out and leaves out the first SETTINGS ACK (the one for the empty SETTINGS). */
  private withoutAck(chunk: Buffer): Buffer {
    const parts: Buffer[] = [];
    let bytes = this.partialHeader ? Buffer.concat([this.partialHeader, chunk]) : chunk;
    this.partialHeader = undefined;
    while (bytes.length && this.dropAck) {
      if (this.payloadLeft > 0) {
        const n = Math.min(this.payloadLeft, bytes.length);
        parts.push(bytes.subarray(0, n));
        this.payloadLeft -= n;
        bytes = bytes.subarray(n);
        continue;
      }
      if (bytes.length < FRAME_HEADER_SIZE) {
        this.partialHeader = Buffer.from(bytes);
        bytes = bytes.subarray(bytes.length);
        break;
      }
      const length = bytes.readUIntBE(0, 3);
      if (bytes[3] === SETTINGS && (bytes[4] & ACK) !== 0) this.dropAck = false;
      else parts.push(bytes.subarray(0, FRAME_HEADER_SIZE));
      this.payloadLeft = length;
      bytes = bytes.subarray(FRAME_HEADER_SIZE);
    }
    parts.push(bytes);
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }

  override _final(done: (err?: Error | null) => void): void {
    this.socket.end(done);
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    this.socket.destroy();
    done(err);
  }
}

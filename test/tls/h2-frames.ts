/**
 * A frame-level HTTP/2 client for tests: writes frames as given (in any
 * order, valid or not) and reads the server's frames one by one, so a test
 * can say exactly which frames a client sees. Header blocks are written
 * with HPACK literals only (no Huffman, no dynamic table); response header
 * blocks are not decoded, except `:status` when the server sends it as a
 * static-table index or a plain literal.
 */
import net from 'node:net';
import tls from 'node:tls';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const DATA = 0, HEADERS = 1, PRIORITY = 2, RST_STREAM = 3, SETTINGS = 4, PUSH_PROMISE = 5, PING = 6, GOAWAY = 7,
  WINDOW_UPDATE = 8, CONTINUATION = 9;
export const END_STREAM = 0x1, ACK = 0x1, END_HEADERS = 0x4;

export interface Frame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream, 5);
  return Buffer.concat([head, payload]);
}

export function settings(pairs: Array<[number, number]> = [], ack = false): Buffer {
  const payload = Buffer.alloc(6 * pairs.length);
  pairs.forEach(([id, value], i) => { payload.writeUInt16BE(id, 6 * i); payload.writeUInt32BE(value, 6 * i + 2); });
  return frame(SETTINGS, ack ? ACK : 0, 0, payload);
}

function literal(s: string): Buffer {
  const bytes = Buffer.from(s, 'latin1');
  if (bytes.length >= 127) return Buffer.concat([Buffer.from([127, ...varint(bytes.length - 127)]), bytes]);
  return Buffer.concat([Buffer.from([bytes.length]), bytes]);
}

function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 128) { out.push((n % 128) + 128); n = Math.floor(n / 128); }
  out.push(n);
  return out;
}

/** A header block of literals without indexing, fields in the order given. */
export function headerBlock(fields: Array<[string, string]>): Buffer {
  return Buffer.concat(fields.map(([n, v]) => Buffer.concat([Buffer.from([0]), literal(n), literal(v)])));
}

/** A GET (or another method) on `stream`, END_STREAM unless a body follows. */
export function request(stream: number, path: string,
  opts: { method?: string; authority?: string; extra?: Array<[string, string]>; body?: boolean } = {}): Buffer {
  const block = headerBlock([[':method', opts.method ?? 'GET'], [':scheme', 'http'], [':path', path], [':authority', opts.authority ?? 'localhost'],
    ...(opts.extra ?? [])]);
  return frame(HEADERS, END_HEADERS | (opts.body ? 0 : END_STREAM), stream, block);
}

/** `:status` of a response HEADERS block as nginx and nghttp2 encode it (an indexed field or a literal). */
export function statusOf(f: Frame): number | undefined {
  const b = f.payload;
  const index = b[0] & 0x7f;
  const table: Record<number, number> = { 8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500 };
  if (b[0] & 0x80) return table[index];
  // a literal with a :status name index (8..14), its value a plain string
  const nameIndex = b[0] & (b[0] & 0x40 ? 0x3f : 0x0f);
  if (nameIndex >= 8 && nameIndex <= 14 && (b[1] & 0x80) === 0) return Number(b.subarray(2, 2 + b[1]).toString('latin1'));
  return undefined;
}

export class FrameClient {
  readonly socket: net.Socket;
  private buf = Buffer.alloc(0);
  private readonly frames: Frame[] = [];
  private waiter: (() => void) | undefined;
  closed = false;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      while (this.buf.length >= 9 && this.buf.length >= 9 + this.buf.readUIntBE(0, 3)) {
        const len = this.buf.readUIntBE(0, 3);
        this.frames.push({ type: this.buf[3], flags: this.buf[4], stream: this.buf.readUInt32BE(5) & 0x7fffffff, payload: this.buf.subarray(9, 9 + len) });
        this.buf = this.buf.subarray(9 + len);
      }
      this.waiter?.();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => { this.closed = true; this.waiter?.(); });
  }

  /** Connects; over TLS with ALPN h2; `proxy` (a PROXY protocol header) goes first, before TLS. Nothing else is sent. */
  static async connect(port: number, secure = false, proxy?: string): Promise<FrameClient> {
    let socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', () => resolve());
      socket.once('error', reject);
    });
    if (proxy) socket.write(proxy);
    if (secure) {
      const plain = socket;
      socket = tls.connect({ socket: plain, ALPNProtocols: ['h2'], rejectUnauthorized: false, servername: 'localhost' });
      await new Promise<void>((resolve, reject) => {
        socket.once('secureConnect', () => resolve());
        socket.once('error', reject);
      });
    }
    return new FrameClient(socket);
  }

  write(...bufs: Buffer[]): void {
    this.socket.write(Buffer.concat(bufs));
  }

  /** The next frame that `match` accepts; frames before it are returned in `skipped` too. Rejects when the connection closes first. */
  async next(match: (f: Frame) => boolean = () => true, skipped: Frame[] = []): Promise<Frame> {
    for (;;) {
      while (this.frames.length) {
        const f = this.frames.shift()!;
        if (match(f)) return f;
        skipped.push(f);
      }
      if (this.closed) throw new Error('connection closed');
      await new Promise<void>((resolve) => { this.waiter = resolve; });
      this.waiter = undefined;
    }
  }

  /** Every frame up to and including the one `match` accepts. */
  async until(match: (f: Frame) => boolean): Promise<Frame[]> {
    const seen: Frame[] = [];
    seen.push(await this.next(match, seen));
    return seen;
  }

  /** Every frame until the connection closes. */
  async rest(): Promise<Frame[]> {
    const seen: Frame[] = [];
    await this.next(() => false, seen).catch(() => undefined);
    return seen;
  }

  close(): void {
    this.socket.destroy();
  }
}

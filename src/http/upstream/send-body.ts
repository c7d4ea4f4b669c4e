/**
 * Writing the request body upstream after the head: a buffered body from
 * memory or its temporary file (resent as is on a retry), `proxy_set_body`,
 * or, with `proxy_request_buffering off`, the client's body as it arrives —
 * chunked to an HTTP/1.1 upstream when the client sent it chunked. A
 * protocol may frame the body (BodyFraming: chunks, FastCGI records). Writes
 * wait for the upstream to drain, and the client is paused meanwhile.
 */
import fs from 'node:fs';
import { chunkSizeLine, LAST_CHUNK } from '../chunked.ts';
import type { UpstreamConnection } from '../../upstream/connection.ts';
import { isChunked, readRequestBody, streamRequestBody } from '../request-body.ts';
import type { BodyConsumer, RequestBody } from '../request-body.ts';
import type { HttpRequest } from '../request.ts';

const BUFFERING = {};

/** This request's proxy_request_buffering (APISIX-Runtime's set_proxy_request_buffering). */
export function setRequestBuffering(r: HttpRequest, on: boolean): void {
  r.ctx.set(BUFFERING, on);
}

/** Whether the body is read whole before it goes upstream: the request's choice, else the location's. */
export function requestBuffering(r: HttpRequest, conf: boolean | undefined): boolean {
  const v = r.ctx.get(BUFFERING);
  return typeof v === 'boolean' ? v : !!conf;
}

/** The side that owns the upstream exchange. */
export interface BodyTarget {
  /** Every body byte was handed to the socket. */
  bodySent(): void;
  /** Reading the client's body failed (unbuffered): 408, 413, 400 or 499. */
  bodyFailed(status: number): void;
}

export interface BodySender {
  /** Writes the body (the head was just written); reports to `target`. */
  start(conn: UpstreamConnection, target: BodyTarget): void;
  /** The upstream socket drained. */
  drain(): void;
  /** Whether a retry may send the body again. */
  readonly replayable: boolean;
}

/**
 * How a protocol wraps body bytes on the wire: HTTP/1.1 chunks, FastCGI's
 * STDIN records. `frame` wraps one piece; `end` follows the last.
 */
export interface BodyFraming {
  frame(data: Buffer): Buffer[];
  readonly end: Buffer;
}

/** HTTP/1.1 chunked transfer coding: one chunk per piece, the last chunk at the end. */
export const CHUNKED_FRAMING: BodyFraming = {
  frame: (data) => [Buffer.from(chunkSizeLine(data.length), 'latin1'), data, CRLF],
  end: Buffer.from(LAST_CHUNK, 'latin1'),
};

const CRLF = Buffer.from('\r\n', 'latin1');

/** Writes `data` framed (or as is); false when the socket wants a drain. */
function writeFramed(conn: UpstreamConnection, data: Buffer, framing: BodyFraming | undefined): boolean {
  if (!framing) return conn.socket.write(data);
  let ok = true;
  for (const b of framing.frame(data)) ok = conn.socket.write(b);
  return ok;
}

/** No body: nothing to write. One object serves every request. */
export const NO_BODY: BodySender = {
  replayable: true,
  start(_conn, target) { target.bodySent(); },
  drain() { /* nothing written */ },
};

/** A body already in memory: written with the head (corked by the caller). */
export class MemorySender implements BodySender {
  readonly replayable = true;
  private readonly bufs: Buffer[];
  private readonly framing: BodyFraming | undefined;
  private waiting: BodyTarget | undefined;

  constructor(bufs: Buffer[], framing?: BodyFraming) {
    this.bufs = bufs;
    this.framing = framing;
  }

  start(conn: UpstreamConnection, target: BodyTarget): void {
    let ok = true;
    for (const b of this.bufs) if (b.length) ok = writeFramed(conn, b, this.framing);
    if (this.framing) ok = conn.socket.write(this.framing.end);
    if (ok) target.bodySent();
    else this.waiting = target;
  }

  drain(): void {
    const t = this.waiting;
    if (!t) return;
    this.waiting = undefined;
    t.bodySent();
  }
}

const FILE_CHUNK = 65536;

/** A buffered body in a temporary file, read in chunks as the upstream takes them. */
export class FileSender implements BodySender {
  readonly replayable = true;
  private readonly body: RequestBody;
  private readonly framing: BodyFraming | undefined;
  private target: BodyTarget | undefined;
  private conn: UpstreamConnection | undefined;
  private pos = 0;
  private fd = -1;

  constructor(body: RequestBody, framing?: BodyFraming) {
    this.body = body;
    this.framing = framing;
  }

  start(conn: UpstreamConnection, target: BodyTarget): void {
    this.conn = conn;
    this.target = target;
    this.pos = 0;
    if (this.fd < 0) this.fd = fs.openSync(this.body.file!, 'r');
    this.pump();
  }

  drain(): void {
    if (this.conn) this.pump();
  }

  private pump(): void {
    const conn = this.conn!;
    while (this.pos < this.body.length) {
      const n = Math.min(FILE_CHUNK, this.body.length - this.pos);
      const b = Buffer.allocUnsafe(n);
      const got = fs.readSync(this.fd, b, 0, n, this.pos);
      if (got <= 0) break;
      this.pos += got;
      if (!writeFramed(conn, got === n ? b : b.subarray(0, got), this.framing)) return;
    }
    this.conn = undefined;
    if (this.framing) conn.socket.write(this.framing.end);
    try { fs.closeSync(this.fd); } catch { /* closed */ }
    this.fd = -1;
    this.target!.bodySent();
  }
}

/**
 * The client's body as it arrives (proxy_request_buffering off). What one
 * read of the client socket brought is sent as one write (one chunk when
 * re-chunked), as nginx sends each read.
 */
export class StreamSender implements BodySender, BodyConsumer {
  readonly replayable = false;
  private target: BodyTarget | undefined;
  private readonly framing: BodyFraming | undefined;
  private conn: UpstreamConnection | undefined;
  /** Data not written yet: before the connection is ready, or within the current read. */
  private pending: Buffer[] = [];
  private scheduled = false;
  private ended = false;
  private failed = 0;
  controls: { pause(): void; resume(): void } | undefined;

  constructor(framing: BodyFraming | undefined) {
    this.framing = framing;
  }

  start(conn: UpstreamConnection, target: BodyTarget): void {
    this.conn = conn;
    this.target = target;
    if (this.failed) { target.bodyFailed(this.failed); return; }
    this.flush();
  }

  drain(): void {
    this.controls?.resume();
  }

  bodyData(chunk: Buffer): void {
    this.pending.push(chunk);
    if (!this.conn || this.scheduled) return;
    this.scheduled = true;
    // after node:http has delivered everything of this read (and its end, if it came)
    setImmediate(this.flush);
  }

  bodyEnd(): void {
    this.ended = true;
    if (this.conn && !this.scheduled) {
      this.conn.socket.cork();
      this.finish();
      this.conn.socket.uncork();
    }
  }

  bodyError(status: number): void {
    this.failed = status;
    if (this.conn) this.target!.bodyFailed(status);
  }

  private flush = (): void => {
    this.scheduled = false;
    if (!this.conn) return;
    const parts = this.pending;
    const s = this.conn.socket;
    s.cork();
    if (parts.length) {
      this.pending = [];
      const data = parts.length === 1 ? parts[0] : Buffer.concat(parts);
      if (!writeFramed(this.conn, data, this.framing)) this.controls?.pause();
    }
    if (this.ended) this.finish();
    s.uncork();
  };

  private finished = false;

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.framing) this.conn!.socket.write(this.framing.end);
    this.target!.bodySent();
  }
}

/** The body a protocol sends upstream: its sender, its length (-1 when streamed chunked) and whether it is streamed chunked. */
export interface OutgoingBody {
  sender: BodySender;
  length: number;
  chunked: boolean;
}

/**
 * Reads (or starts streaming) the client's body for an upstream request:
 * streamed as it arrives when `stream` allows it and the body has not
 * already arrived whole (nginx sends a preread body as a buffered one),
 * else read whole (memory or temporary file). `framing` wraps it for the
 * protocol (`chunkedIn`: the client sent it chunked). A status when reading
 * failed.
 */
export async function outgoingBody(r: HttpRequest, opts: {
  stream: boolean; passBody: boolean; framing: (chunkedIn: boolean) => BodyFraming | undefined;
}): Promise<OutgoingBody | number> {
  const chunkedIn = isChunked(r);
  let streaming = opts.stream && opts.passBody;
  // node:http finishes parsing what came with the head within this turn of the event loop
  if (streaming && !r.body.complete) await new Promise(setImmediate);
  if (r.body.complete) streaming = false;
  if (streaming) {
    const s = new StreamSender(opts.framing(chunkedIn));
    s.controls = streamRequestBody(r, s);
    return { sender: s, length: chunkedIn ? -1 : r.head.contentLength, chunked: chunkedIn };
  }
  const rb = await readRequestBody(r);
  if (typeof rb === 'number') return rb;
  let sender: BodySender;
  if (!opts.passBody) sender = NO_BODY;
  else if (rb.file !== undefined) sender = new FileSender(rb, opts.framing(false));
  else sender = new MemorySender(rb.bufs, opts.framing(false));
  return { sender, length: rb.length, chunked: false };
}

/**
 * Writing the request body upstream after the head: a buffered body from
 * memory or its temporary file (resent as is on a retry), `proxy_set_body`,
 * or, with `proxy_request_buffering off`, the client's body as it arrives —
 * chunked to an HTTP/1.1 upstream when the client sent it chunked. Writes
 * wait for the upstream to drain, and the client is paused meanwhile.
 */
import fs from 'node:fs';
import type { UpstreamConnection } from '../../upstream/connection.ts';
import type { BodyConsumer, RequestBody } from '../request-body.ts';

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
  private waiting: BodyTarget | undefined;

  constructor(bufs: Buffer[]) {
    this.bufs = bufs;
  }

  start(conn: UpstreamConnection, target: BodyTarget): void {
    let ok = true;
    for (const b of this.bufs) ok = conn.socket.write(b);
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
  private target: BodyTarget | undefined;
  private conn: UpstreamConnection | undefined;
  private pos = 0;
  private fd = -1;

  constructor(body: RequestBody) {
    this.body = body;
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
      if (!conn.socket.write(got === n ? b : b.subarray(0, got))) return;
    }
    this.conn = undefined;
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
  private readonly chunked: boolean;
  private conn: UpstreamConnection | undefined;
  /** Data not written yet: before the connection is ready, or within the current read. */
  private pending: Buffer[] = [];
  private scheduled = false;
  private ended = false;
  private failed = 0;
  controls: { pause(): void; resume(): void } | undefined;

  constructor(chunked: boolean) {
    this.chunked = chunked;
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
      if (this.chunked) s.write(data.length.toString(16) + '\r\n', 'latin1');
      if (!s.write(data)) this.controls?.pause();
      if (this.chunked) s.write('\r\n', 'latin1');
    }
    if (this.ended) this.finish();
    s.uncork();
  };

  private finished = false;

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.chunked) this.conn!.socket.write('0\r\n\r\n', 'latin1');
    this.target!.bodySent();
  }
}

/**
 * Relaying the upstream's response body to the client.
 *
 * `proxy_buffering off`: data goes out as it arrives, at most
 * `proxy_buffer_size` bytes per write; when the client is slow the upstream
 * is paused until the client drains.
 *
 * `proxy_buffering on` (nginx's event pipe): data fills buffers of the
 * `proxy_buffers` size and a buffer goes out when it is full, when it holds
 * the rest of a body of known length, or when the body ends (a chunked
 * body goes out as each read is decoded, as nginx's chunked filter does).
 * While the client is slow, up to all `proxy_buffers` are held in memory,
 * then up to `proxy_max_temp_file_size` bytes go to a temporary file in
 * `proxy_temp_path`, then the upstream is paused. Memory stays bounded for
 * any body size and client speed.
 */
import fs from 'node:fs';
import { countRead } from '../../core/read-budget.ts';
import { cancelBodyDrain, waitBodyDrain } from '../body-filter.ts';
import { createTempFile } from '../request-body.ts';
import { endBody, sendBody } from '../response.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { coreLoc, CORE_LOC_DEFAULTS } from '../core/settings.ts';

/** What the relay needs from the upstream side. */
export interface RelaySource {
  pauseUpstream(): void;
  resumeUpstream(): void;
  /** Everything was written to the client (or the client is gone: `ok` false). */
  relayDone(ok: boolean): void;
}

/** The relay's settings, taken from the location (ProxyLocConf and DerivedConf fields). */
export interface RelayConf {
  bufferSize: number;
  buffers: { num: number; size: number };
  maxTempFileSize: number;
}

export interface RelayDerived {
  tempFileWriteSize: number;
  tempPath: string;
}

const FILE_READ_SIZE = 65536;

interface FileRange {
  start: number;
  end: number;
}

export class BodyRelay {
  private readonly r: HttpRequest;
  private readonly src: RelaySource;
  private readonly buffering: boolean;
  private readonly bufferSize: number;
  private readonly bufs: { num: number; size: number };
  private readonly maxTempFileSize: number;
  private readonly d: RelayDerived;
  /** Body bytes still expected (-1: unknown, until close or chunked). */
  private length: number;
  private readonly chunked: boolean;
  /** Bytes read but not yet released (the buffer being filled). */
  private pending: Buffer[] = [];
  private pendingLen = 0;
  /** Released bytes waiting for the client, in order: buffers in memory and ranges of the temp file. */
  private held: (Buffer | FileRange)[] = [];
  private heldMem = 0;
  /** The temp file and how much was written to it. */
  private fd = -1;
  private filePath = '';
  private fileWritten = 0;
  private waitingDrain = false;
  private paused = false;
  private ended = false;
  /** The upstream failed: send what we have, then close the connection. */
  private truncated = false;
  private finished = false;
  private sendTimer: NodeJS.Timeout | undefined;
  /** The last piece of the body, kept to be written with the end. */
  private tail: Buffer | undefined;
  /** proxy_cache's writer (cache.ts): gets every body byte, stores the file when the body ended complete. */
  tee: { push(b: Buffer): void; end(): void; abort(): void } | undefined;
  /** A HEAD client of a response read for the cache: the body goes to the tee only. */
  teeOnly = false;
  /** Bound once, only for a client that pushes back. */
  private drainListener: (() => void) | undefined;

  constructor(r: HttpRequest, src: RelaySource, c: RelayConf, d: RelayDerived, buffering: boolean, length: number, chunked: boolean) {
    this.r = r;
    this.src = src;
    this.buffering = buffering;
    this.bufferSize = c.bufferSize;
    this.bufs = c.buffers;
    this.maxTempFileSize = c.maxTempFileSize;
    this.d = d;
    this.length = length;
    this.chunked = chunked;
  }

  /** Decoded body bytes from the upstream. */
  push(data: Buffer): void {
    if (this.finished || data.length === 0) return;
    this.tee?.push(data);
    if (this.teeOnly) return;
    if (!this.buffering) {
      if (this.length >= 0) this.length -= data.length;
      const max = this.bufferSize;
      for (let off = 0; off < data.length; off += max) {
        this.release(off === 0 && data.length <= max ? data : data.subarray(off, off + max));
      }
      return;
    }
    this.pending.push(data);
    this.pendingLen += data.length;
    if (this.length >= 0) this.length -= data.length;
    // every full buffer goes out together (nginx passes the chain on in one output call: one chunk)
    const full = this.pendingLen - (this.pendingLen % this.bufs.size);
    if (full > 0) this.releasePending(full);
    if (this.chunked || (this.length === 0 && this.pendingLen > 0)) this.releasePending(this.pendingLen);
  }

  /** The upstream body is complete. */
  end(): void {
    if (this.finished) return;
    this.ended = true;
    if (this.truncated) this.tee?.abort();
    else this.tee?.end();
    if (this.pendingLen) this.releasePending(this.pendingLen);
    this.maybeFinish();
  }

  /** The upstream broke off: the client gets what was read, then the connection closes. */
  fail(): void {
    if (this.finished) return;
    this.truncated = true;
    this.end();
  }

  /** The upstream timed out: nginx does not run its event pipe then, so what was not released yet is never sent. */
  timedOut(): void {
    this.pending = [];
    this.pendingLen = 0;
    this.fail();
  }

  /** The client went away: stop and free everything. */
  abort(): void {
    this.tee?.abort();
    if (this.finished) return;
    this.finished = true;
    this.cleanup();
  }

  private releasePending(n: number): void {
    let buf: Buffer;
    if (this.pending.length === 1 && this.pending[0].length === n) {
      buf = this.pending[0];
      this.pending = [];
    } else {
      const all = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.pendingLen);
      buf = all.subarray(0, n);
      this.pending = all.length > n ? [all.subarray(n)] : [];
    }
    this.pendingLen -= n;
    this.release(buf);
  }

  /** A buffer ready for the client: written now if it can be, else held in memory or the temp file. */
  private release(buf: Buffer): void {
    if (!this.waitingDrain && this.held.length === 0) {
      // the last piece of a body of known length goes with the end: one write for a small response
      if (this.length === 0 && this.tail === undefined && this.pendingLen === 0) this.tail = buf;
      else this.write(buf);
    } else {
      const memLimit = this.buffering ? this.bufs.num * this.bufs.size : 0;
      if (this.heldMem + buf.length <= Math.max(memLimit, buf.length) || !this.spill(buf)) {
        this.held.push(buf);
        this.heldMem += buf.length;
      }
    }
    if (!this.paused && this.full()) {
      this.paused = true;
      this.src.pauseUpstream();
    }
  }

  /** Whether reading from the upstream must wait for the client. */
  private full(): boolean {
    if (!this.buffering) return this.waitingDrain;
    if (this.heldMem < this.bufs.num * this.bufs.size) return false;
    return this.fileWritten + this.d.tempFileWriteSize > this.maxTempFileSize;
  }

  /** Appends `buf` to the temp file if the allowance permits; false when it does not. */
  private spill(buf: Buffer): boolean {
    if (!this.buffering || this.fileWritten + buf.length > this.maxTempFileSize || !this.writeFile(buf)) return false;
    const last = this.held[this.held.length - 1];
    if (last && !Buffer.isBuffer(last) && last.end === this.fileWritten - buf.length) last.end = this.fileWritten;
    else this.held.push({ start: this.fileWritten - buf.length, end: this.fileWritten });
    return true;
  }

  private writeFile(buf: Buffer): boolean {
    try {
      if (this.fd < 0) {
        const t = createTempFile(this.d.tempPath);
        this.fd = t.fd;
        this.filePath = t.path;
        requestLog(this.r).warn(`an upstream response is buffered to a temporary file ${t.path} while reading upstream`);
      }
      fs.writeSync(this.fd, buf, 0, buf.length, this.fileWritten);
      this.fileWritten += buf.length;
      return true;
    } catch (err) {
      requestLog(this.r).crit(`write to temporary file failed (${(err as Error).message})`);
      return false;
    }
  }

  private write(buf: Buffer): void {
    if (!sendBody(this.r, buf)) this.waitDrain();
  }

  private waitDrain(): void {
    if (this.waitingDrain) return;
    this.waitingDrain = true;
    this.drainListener ??= () => this.onDrain();
    waitBodyDrain(this.r, this.drainListener);
    const timeout = this.r.level.get(coreLoc).sendTimeout ?? CORE_LOC_DEFAULTS.sendTimeout;
    if (this.sendTimer) this.sendTimer.refresh();
    else this.sendTimer = setTimeout(() => this.onSendTimeout(), timeout);
    if (!this.buffering && !this.paused) {
      this.paused = true;
      this.src.pauseUpstream();
    }
  }

  private onSendTimeout(): void {
    if (this.finished || !this.waitingDrain) return;
    requestLog(this.r).info('client timed out (110: Connection timed out) while sending to client');
    this.finished = true;
    this.cleanup();
    this.r.sink.abort();
    this.src.relayDone(false);
  }

  private onDrain(): void {
    this.waitingDrain = false;
    if (this.finished) return;
    clearTimeout(this.sendTimer);
    // held data in order, until the client pushes back again
    while (!this.waitingDrain && this.held.length) {
      const h = this.held[0];
      if (Buffer.isBuffer(h)) {
        this.held.shift();
        this.heldMem -= h.length;
        this.write(h);
        continue;
      }
      const n = Math.min(FILE_READ_SIZE, h.end - h.start);
      const b = Buffer.allocUnsafe(n);
      fs.readSync(this.fd, b, 0, n, h.start);
      countRead(n);
      h.start += n;
      if (h.start === h.end) this.held.shift();
      this.write(b);
    }
    if (this.paused && !this.full() && !this.waitingDrain) {
      this.paused = false;
      this.src.resumeUpstream();
    }
    this.maybeFinish();
  }

  private maybeFinish(): void {
    if (!this.ended || this.finished || this.waitingDrain || this.held.length) return;
    this.finished = true;
    clearTimeout(this.sendTimer);
    this.cleanup();
    const tail = this.tail;
    this.tail = undefined;
    if (this.truncated) {
      if (tail) sendBody(this.r, tail);
      // nginx flushes the head before closing, even when no body byte went out
      else if (this.r.bodyBytesSent === 0) this.r.sink.flushHead();
      // no terminating chunk: the client sees the response cut short, as nginx sends it
      const socket = this.r.sink.socket;
      if (socket) socket.end();
      else this.r.sink.abort();
      this.src.relayDone(false);
      return;
    }
    endBody(this.r, tail);
    this.src.relayDone(true);
  }

  private cleanup(): void {
    clearTimeout(this.sendTimer);
    if (this.drainListener) cancelBodyDrain(this.r, this.drainListener);
    this.held = [];
    this.pending = [];
    if (this.fd >= 0) {
      try { fs.closeSync(this.fd); } catch { /* closed */ }
      fs.unlink(this.filePath, () => undefined);
      this.fd = -1;
    }
  }
}

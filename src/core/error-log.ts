/**
 * nginx's error log: `2026/11/22 10:00:00 [error] PID#TID: *CONN message`,
 * one write(2) per line on an O_APPEND descriptor so lines from several
 * workers never tear, several destinations with their own levels, reopened
 * on USR1.
 */
import { SyslogPeer } from './access-log/syslog.ts';
import fs from 'node:fs';
import { threadId } from 'node:worker_threads';
import { sysErrorText } from '../conf/errors.ts';

/** The levels `limit_req_log_level` and `limit_conn_log_level` take (http and stream). */
export const LIMIT_LOG_LEVELS = ['info', 'notice', 'warn', 'error'] as const;

export const LogLevel = {
  stderr: 0, emerg: 1, alert: 2, crit: 3, error: 4, warn: 5, notice: 6, info: 7, debug: 8,
} as const;

export const LEVEL_NAMES = ['stderr', 'emerg', 'alert', 'crit', 'error', 'warn', 'notice', 'info', 'debug'];

/** nginx's NGX_MAX_ERROR_STR: a line, newline included, is cut to this many bytes (and so fits one atomic pipe write). */
const MAX_LINE = 2048;

export interface ErrorLogSpec {
  /** An absolute file path, or `stderr` (also for `syslog:`, which has no file). */
  file: string;
  level: number;
  /** `error_log syslog:…`: what follows `syslog:`. */
  syslog?: string;
}

interface Destination {
  spec: ErrorLogSpec;
  /** The shared open file, or undefined for stderr and syslog. */
  entry: OpenFile | undefined;
  syslog?: SyslogPeer;
}

interface OpenFile {
  fd: number;
  refs: number;
}

/** Files are shared by path within a thread, so reopen touches each file once. */
const openFiles = new Map<string, OpenFile>();

/** Opens `file` for appending as nginx does (O_WRONLY|O_APPEND|O_CREAT, 0644); throws the system error. */
export function openAppend(file: string): number {
  return fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o644);
}

function acquire(file: string): OpenFile | undefined {
  if (file === 'stderr') return undefined;
  let have = openFiles.get(file);
  if (have) { have.refs++; return have; }
  have = { fd: openAppend(file), refs: 1 };
  openFiles.set(file, have);
  return have;
}

function release(file: string): void {
  const have = openFiles.get(file);
  if (!have || --have.refs > 0) return;
  openFiles.delete(file);
  try { fs.closeSync(have.fd); } catch { /* already closed */ }
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/**
 * Writes all of `data` with as few write(2) calls as the kernel allows: one
 * for a regular file. A non-blocking pipe that is full (EAGAIN) is waited on
 * briefly, as a blocking write would; after that the rest is dropped.
 */
export function writeAll(fd: number, data: Buffer): void {
  let off = 0;
  let waits = 0;
  while (off < data.length) {
    try {
      off += fs.writeSync(fd, data, off, data.length - off);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN' || ++waits > 200) throw e;
      Atomics.wait(sleeper, 0, 0, 5);
    }
  }
}

/** Checks that `file` can be opened for appending (creating it, as nginx does at startup); returns nginx's error text or undefined. */
export function checkLogFile(file: string): string | undefined {
  if (file === 'stderr') return undefined;
  try {
    fs.closeSync(openAppend(file));
    return undefined;
  } catch (e) {
    return `open() "${file}" failed ${sysErrorText(e)}`;
  }
}

/** Reopens every error log file this thread has open (USR1); returns nginx's messages for the files that failed (they keep the old descriptor). */
export function reopenErrorLogs(): string[] {
  const failed: string[] = [];
  for (const [file, entry] of openFiles) {
    try {
      const fd = openAppend(file);
      const old = entry.fd;
      entry.fd = fd;
      fs.closeSync(old);
    } catch (e) {
      failed.push(`open() "${file}" failed ${sysErrorText(e)}`);
    }
  }
  return failed;
}

function pad(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

let timeSec = -1;
let timeText = '';

/** nginx's error log time: local `YYYY/MM/DD HH:MM:SS`, formatted once per second. */
export function logTime(ms = Date.now()): string {
  const sec = Math.floor(ms / 1000);
  if (sec === timeSec) return timeText;
  const d = new Date(sec * 1000);
  timeSec = sec;
  timeText = `${d.getFullYear()}/${pad(d.getMonth() + 1)}/${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return timeText;
}

/** The line as bytes (strings here are byte strings), cut to nginx's limit with the newline kept. */
function lineBytes(text: string): Buffer {
  const buf = Buffer.from(text, 'latin1');
  if (buf.length < MAX_LINE) return Buffer.concat([buf, NEWLINE]);
  const cut = Buffer.allocUnsafe(MAX_LINE);
  buf.copy(cut, 0, 0, MAX_LINE - 1);
  cut[MAX_LINE - 1] = 0x0a;
  return cut;
}

const NEWLINE = Buffer.from('\n');

export class ErrorLog {
  private readonly dests: Destination[];
  /** Highest level any destination accepts, to skip formatting early. */
  readonly maxLevel: number;
  /** Also print `gatehouse: [level] message` on stderr for warn and worse (startup, -t). */
  useStderr: boolean;
  private closed = false;

  /** Opens every file of `specs`; throws the system error of the first that cannot be opened. */
  constructor(specs: ErrorLogSpec[], useStderr = false) {
    const dests: Destination[] = [];
    try {
      for (const spec of specs) dests.push(spec.syslog !== undefined ? { spec, entry: undefined, syslog: new SyslogPeer(spec.syslog, (m) => mainErrorLog().warn(m)) } : { spec, entry: acquire(spec.file) });
    } catch (e) {
      for (const d of dests) if (d.entry) release(d.spec.file);
      throw e;
    }
    this.dests = dests;
    this.maxLevel = Math.max(0, ...specs.map((s) => s.level));
    this.useStderr = useStderr;
  }

  enabled(level: number): boolean {
    return level <= this.maxLevel;
  }

  /** Logs `message`; `conn` is the connection number shown as `*N`. */
  log(level: number, message: string, conn?: number): void {
    // a late message for a configuration that stopped serving goes to the current main log
    if (this.closed) {
      if (mainLog !== this) mainLog.log(level, message, conn);
      return;
    }
    let wroteStderr = false;
    if (level <= this.maxLevel) {
      // nginx's level 0 (NGX_LOG_STDERR, which Lua's ngx.STDERR logs at) has an empty name: "[] "
      const text = `${logTime()} [${level === 0 ? '' : LEVEL_NAMES[level]}] ${process.pid}#${threadId}: ${conn ? `*${conn} ` : ''}${message}`;
      const line = lineBytes(text);
      // each destination gets its own write, as in nginx: a file named twice gets the line twice
      for (const d of this.dests) {
        if (level > d.spec.level) continue;
        if (d.syslog) {
          // ngx_syslog_writer: the whole line after the syslog header, at the line's own severity
          d.syslog.send(text, level - 1);
          continue;
        }
        const fd = d.entry ? d.entry.fd : 2;
        try { writeAll(fd, line); } catch { /* a log that cannot be written is not worth dying for */ }
        if (fd === 2) wroteStderr = true;
      }
    }
    if (this.useStderr && level <= LogLevel.warn && !wroteStderr) {
      try { writeAll(2, Buffer.from(`gatehouse: [${LEVEL_NAMES[level]}] ${message}\n`, 'latin1')); } catch { /* ignore */ }
    }
  }

  emerg(msg: string): void { this.log(LogLevel.emerg, msg); }
  alert(msg: string): void { this.log(LogLevel.alert, msg); }
  crit(msg: string, conn?: number): void { this.log(LogLevel.crit, msg, conn); }
  error(msg: string, conn?: number): void { this.log(LogLevel.error, msg, conn); }
  warn(msg: string, conn?: number): void { this.log(LogLevel.warn, msg, conn); }
  notice(msg: string, conn?: number): void { this.log(LogLevel.notice, msg, conn); }
  info(msg: string, conn?: number): void { this.log(LogLevel.info, msg, conn); }
  debug(msg: string, conn?: number): void { this.log(LogLevel.debug, msg, conn); }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const d of this.dests) {
      if (d.entry) release(d.spec.file);
      d.syslog?.close();
    }
  }
}

let mainLog: ErrorLog = new ErrorLog([{ file: 'stderr', level: LogLevel.error }]);

/** The error log of the running cycle (the main context's `error_log`s). */
export function mainErrorLog(): ErrorLog {
  return mainLog;
}

export function setMainErrorLog(log: ErrorLog): void {
  mainLog = log;
}

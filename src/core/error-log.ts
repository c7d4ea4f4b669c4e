/**
 * nginx's error log: `2026/11/22 10:00:00 [error] PID#TID: *CONN message`,
 * one write(2) per line on an O_APPEND descriptor so lines from several
 * workers never tear, several destinations with their own levels, reopened
 * on USR1.
 */
import fs from 'node:fs';
import { threadId } from 'node:worker_threads';

export const LogLevel = {
  stderr: 0, emerg: 1, alert: 2, crit: 3, error: 4, warn: 5, notice: 6, info: 7, debug: 8,
} as const;

export const LEVEL_NAMES = ['stderr', 'emerg', 'alert', 'crit', 'error', 'warn', 'notice', 'info', 'debug'];

export interface ErrorLogSpec {
  /** An absolute file path, or `stderr`. */
  file: string;
  level: number;
}

interface Destination {
  spec: ErrorLogSpec;
  fd: number;
}

/** Destinations are shared by path within a thread, so reopen touches each file once. */
const openFiles = new Map<string, { fd: number; refs: number }>();

function openLog(file: string): number {
  if (file === 'stderr') return 2;
  const have = openFiles.get(file);
  if (have) { have.refs++; return have.fd; }
  const fd = fs.openSync(file, 'a', 0o644);
  openFiles.set(file, { fd, refs: 1 });
  return fd;
}

function closeLog(file: string): void {
  const have = openFiles.get(file);
  if (!have || --have.refs > 0) return;
  openFiles.delete(file);
  try { fs.closeSync(have.fd); } catch { /* already closed */ }
}

/** Reopens every error log file this thread has open (USR1); returns the files that failed. */
export function reopenErrorLogs(): string[] {
  const failed: string[] = [];
  for (const [file, entry] of openFiles) {
    try {
      const fd = fs.openSync(file, 'a', 0o644);
      const old = entry.fd;
      entry.fd = fd;
      fs.closeSync(old);
    } catch {
      failed.push(file);
    }
  }
  return failed;
}

function pad(n: number, w = 2): string {
  return String(n).padStart(w, '0');
}

/** nginx's error log time: local `YYYY/MM/DD HH:MM:SS`. */
export function logTime(d = new Date()): string {
  return `${d.getFullYear()}/${pad(d.getMonth() + 1)}/${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export class ErrorLog {
  private readonly dests: Destination[];
  /** Highest level any destination accepts, to skip formatting early. */
  readonly maxLevel: number;
  /** Also print `gatehouse: [level] message` on stderr for warn and worse (startup, -t). */
  useStderr: boolean;

  constructor(specs: ErrorLogSpec[], useStderr = false) {
    this.dests = specs.map((spec) => ({ spec, fd: openLog(spec.file) }));
    this.maxLevel = Math.max(0, ...specs.map((s) => s.level));
    this.useStderr = useStderr;
  }

  enabled(level: number): boolean {
    return level <= this.maxLevel;
  }

  /** Logs `message`; `conn` is the connection number shown as `*N`. */
  log(level: number, message: string, conn?: number): void {
    let wroteStderr = false;
    if (level <= this.maxLevel) {
      const line = `${logTime()} [${LEVEL_NAMES[level]}] ${process.pid}#${threadId}: ${conn ? `*${conn} ` : ''}${message}\n`;
      for (const d of this.dests) {
        if (level > d.spec.level) continue;
        const fd = d.spec.file === 'stderr' ? 2 : openFiles.get(d.spec.file)?.fd ?? d.fd;
        try { fs.writeSync(fd, line); } catch { /* a log that cannot be written is not worth dying for */ }
        if (fd === 2) wroteStderr = true;
      }
    }
    if (this.useStderr && level <= LogLevel.warn && !wroteStderr) {
      try { fs.writeSync(2, `gatehouse: [${LEVEL_NAMES[level]}] ${message}\n`); } catch { /* ignore */ }
    }
  }

  emerg(msg: string): void { this.log(LogLevel.emerg, msg); }
  alert(msg: string): void { this.log(LogLevel.alert, msg); }
  error(msg: string, conn?: number): void { this.log(LogLevel.error, msg, conn); }
  warn(msg: string, conn?: number): void { this.log(LogLevel.warn, msg, conn); }
  notice(msg: string, conn?: number): void { this.log(LogLevel.notice, msg, conn); }
  info(msg: string, conn?: number): void { this.log(LogLevel.info, msg, conn); }
  debug(msg: string, conn?: number): void { this.log(LogLevel.debug, msg, conn); }

  close(): void {
    for (const d of this.dests) closeLog(d.spec.file);
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

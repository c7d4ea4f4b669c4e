/**
 * access_log paths with variables, for http and stream
 * (ngx_http_log_script_write, ngx_stream_log_script_write): the file is
 * opened for each line and closed again — unless `open_log_file_cache`
 * keeps its descriptor. (http's extra rule, nothing written while the
 * request's root directory does not exist, is the http module's.)
 */
import fs from 'node:fs';
import { sysErrorText } from '../../conf/errors.ts';
import { LogLevel, openAppend, writeAll } from '../error-log.ts';

export interface OpenLogCacheOptions {
  max: number;
  inactiveMs: number;
  minUses: number;
  validMs: number;
}

interface CacheEntry {
  /** The kept descriptor, or -1 while the file has been used fewer than min_uses times. */
  fd: number;
  uses: number;
  accessed: number;
  /** When the descriptor was opened or last checked against the path. */
  checked: number;
}

/**
 * `open_log_file_cache`: descriptors of files named by variables, kept
 * after `min_uses` uses, checked against the path every `valid`, dropped
 * after `inactive` without use or when `max` is reached (least recently used
 * first), as ngx_open_cached_file does for logs. One per directive and
 * worker; closed when the configuration stops serving.
 */
export class OpenLogFileCache {
  readonly options: OpenLogCacheOptions;
  /** In order of last use, least recent first. */
  private readonly entries = new Map<string, CacheEntry>();

  constructor(options: OpenLogCacheOptions) {
    this.options = options;
  }

  private drop(path: string, entry: CacheEntry): void {
    this.entries.delete(path);
    if (entry.fd >= 0) try { fs.closeSync(entry.fd); } catch { /* gone */ }
  }

  /** A descriptor for `path` and whether the cache keeps it (else the caller closes it); throws the open error. */
  open(path: string, now: number): { fd: number; kept: boolean } {
    const o = this.options;
    for (const [p, e] of this.entries) {
      if (now - e.accessed < o.inactiveMs) break;
      this.drop(p, e);
    }
    const entry = this.entries.get(path);
    if (!entry) {
      const fd = openAppend(path);
      if (this.entries.size >= o.max) {
        const [p, e] = this.entries.entries().next().value!;
        this.drop(p, e);
      }
      const kept = o.minUses <= 1;
      this.entries.set(path, { fd: kept ? fd : -1, uses: 1, accessed: now, checked: now });
      return { fd, kept };
    }
    this.entries.delete(path);
    this.entries.set(path, entry);
    entry.uses++;
    entry.accessed = now;
    if (entry.fd >= 0 && now - entry.checked < o.validMs) return { fd: entry.fd, kept: true };
    if (entry.fd >= 0) {
      // revalidate: keep the descriptor while the path still names the same file
      entry.checked = now;
      try {
        const a = fs.fstatSync(entry.fd);
        const b = fs.statSync(path);
        if (a.ino === b.ino && a.dev === b.dev) return { fd: entry.fd, kept: true };
      } catch { /* renamed or removed: open again */ }
      try { fs.closeSync(entry.fd); } catch { /* gone */ }
      entry.fd = -1;
    }
    const fd = openAppend(path);
    if (entry.uses >= o.minUses) {
      entry.fd = fd;
      entry.checked = now;
      return { fd, kept: true };
    }
    return { fd, kept: false };
  }

  close(): void {
    for (const [p, e] of this.entries) this.drop(p, e);
  }
}

/** Logs an error about the request or session `x` with its context (each protocol has its own). */
export type ReportError<T> = (x: T, level: number, message: string) => void;

/** Writes `line` to the file `path` (the evaluated access_log path of `x`). */
export function writeToVariablePath<T>(x: T, report: ReportError<T>, path: string, cache: OpenLogFileCache | undefined, line: string): void {
  let fd: number;
  let kept = false;
  try {
    if (cache) ({ fd, kept } = cache.open(path, Date.now()));
    else fd = openAppend(path);
  } catch (e) {
    report(x, LogLevel.crit, `open() "${path}" failed ${sysErrorText(e)}`);
    return;
  }
  try {
    writeAll(fd, Buffer.from(line, 'latin1'));
  } catch (e) {
    report(x, LogLevel.alert, `write() to "${path}" failed ${sysErrorText(e)}`);
  } finally {
    if (!kept) fs.closeSync(fd);
  }
}

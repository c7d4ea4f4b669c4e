/**
 * access_log paths with variables (ngx_http_log_script_write): the file is
 * opened for each line and closed again — unless `open_log_file_cache`
 * keeps its descriptor — and, as nginx documents, nothing is written while
 * the request's root directory does not exist.
 */
import fs from 'node:fs';
import { sysErrorText } from '../../../conf/errors.ts';
import { openAppend, writeAll } from '../../../core/error-log.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { mapUriToPath } from '../core/root.ts';

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

const LOGGING = 'logging request';

/** Writes `line` to the file `path` names for this request. */
export function writeToVariablePath(r: HttpRequest, path: string, cache: OpenLogFileCache | undefined, line: string): void {
  const mapped = mapUriToPath(r);
  const root = mapped.path.slice(0, mapped.rootLength);
  try {
    if (!fs.statSync(root).isDirectory()) {
      requestLog(r, LOGGING).error(`testing "${root}" existence failed (20: Not a directory)`);
      return;
    }
  } catch (e) {
    requestLog(r, LOGGING).error(`testing "${root}" existence failed ${sysErrorText(e)}`);
    return;
  }
  let fd: number;
  let kept = false;
  try {
    if (cache) ({ fd, kept } = cache.open(path, Date.now()));
    else fd = openAppend(path);
  } catch (e) {
    requestLog(r, LOGGING).crit(`open() "${path}" failed ${sysErrorText(e)}`);
    return;
  }
  try {
    writeAll(fd, Buffer.from(line, 'latin1'));
  } catch (e) {
    requestLog(r, LOGGING).alert(`write() to "${path}" failed ${sysErrorText(e)}`);
  } finally {
    if (!kept) fs.closeSync(fd);
  }
}

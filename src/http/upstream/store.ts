/**
 * proxy_store (nginx's ngx_http_upstream_store): a buffered 200 response is
 * written to a temporary file in proxy_temp_path as it is relayed, and when
 * its body is complete (all of Content-Length, when there is one) the file
 * is renamed to the document root + URI, or to the path `proxy_store`
 * gives, with proxy_store_access rights, the upstream's Last-Modified as
 * its time, and missing directories created. Anything else removes it.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { ConfContext } from '../../conf/context.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { createTempFile } from '../request-body.ts';
import { requestLog } from '../request-log.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { mapUriToPath } from '../core/root.ts';
import { parseHttpTime } from '../../core/http-time.ts';
import type { UpstreamConf } from './conf.ts';
import type { UpstreamHead } from './protocol.ts';

/** `proxy_store on | off | path`: true stores at root + URI. */
export function parseStore(cf: ConfContext, arg: string): boolean | ComplexValue {
  if (arg === 'off') return false;
  if (arg === 'on') return true;
  return compileComplex(cf, httpMainOf(cf).variables, arg);
}

/** `proxy_store_access user:rw group:r all:r` (ngx_conf_set_access_slot); a string is nginx's error. */
export function parseAccess(args: string[]): number | string {
  let access = 0;
  let user = 0o600;
  for (const a of args) {
    let shift: number;
    let rest: string;
    if (a.startsWith('user:')) { shift = 6; rest = a.slice(5); user = 0; }
    else if (a.startsWith('group:')) { shift = 3; rest = a.slice(6); }
    else if (a.startsWith('all:')) { shift = 0; rest = a.slice(4); }
    else return `invalid value "${a}"`;
    if (rest === 'rw') access |= 6 << shift;
    else if (rest === 'r') access |= 4 << shift;
    else return `invalid value "${a}"`;
  }
  return access | user;
}

export interface StoreTarget {
  push(b: Buffer): void;
  end(): void;
  abort(): void;
}

class StoreWriter implements StoreTarget {
  private readonly r: HttpRequest;
  private readonly c: UpstreamConf;
  private readonly tmp: string;
  private fd: number;
  private size = 0;
  private readonly contentLength: number;
  private readonly mtime: number;
  private done = false;

  constructor(r: HttpRequest, c: UpstreamConf, tmp: { path: string; fd: number }, contentLength: number, mtime: number) {
    this.r = r;
    this.c = c;
    this.tmp = tmp.path;
    this.fd = tmp.fd;
    this.contentLength = contentLength;
    this.mtime = mtime;
  }

  push(b: Buffer): void {
    if (this.done) return;
    try {
      fs.writeSync(this.fd, b);
      this.size += b.length;
    } catch (err) {
      requestLog(this.r).crit(`write() "${this.tmp}" failed (${(err as NodeJS.ErrnoException).code})`);
      this.abort();
    }
  }

  end(): void {
    if (this.done) return;
    this.done = true;
    fs.closeSync(this.fd);
    // a body shorter than announced (a HEAD request's, say) is not stored
    if (this.contentLength >= 0 && this.contentLength !== this.size) {
      removeNow(this.tmp);
      return;
    }
    const store = this.c.store!;
    const dest = store === true ? mapUriToPath(this.r).path : (store as ComplexValue).evaluate(this.r);
    if (!dest) {
      removeNow(this.tmp);
      return;
    }
    const access = this.c.storeAccess ?? 0o600;
    try {
      fs.chmodSync(this.tmp, access);
      if (this.mtime >= 0) fs.utimesSync(this.tmp, this.mtime, this.mtime);
      renameCreatingPath(this.tmp, dest, access);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      requestLog(this.r).crit(`rename() "${this.tmp}" to "${dest}" failed (${e.errno ? -e.errno : 0}: ${e.code})`);
      removeNow(this.tmp);
    }
  }

  abort(): void {
    if (this.done) return;
    this.done = true;
    try { fs.closeSync(this.fd); } catch { /* closed */ }
    removeNow(this.tmp);
  }
}

/** The temporary file goes at once, as nginx deletes it (no leftovers for the next request to see). */
function removeNow(file: string): void {
  try { fs.unlinkSync(file); } catch { /* gone */ }
}

/** ngx_ext_rename_file with create_path: missing directories get the access bits plus x where r is set. */
function renameCreatingPath(from: string, to: string, access: number): void {
  try {
    fs.renameSync(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    const dirAccess = access | ((access & 0o444) >> 2);
    fs.mkdirSync(path.dirname(to), { recursive: true, mode: dirAccess });
    fs.renameSync(from, to);
  }
}

/**
 * Hook: the upstream's head was accepted. The writer for the body when the
 * location stores responses and this one qualifies (200, buffered).
 */
export function storeWriter(r: HttpRequest, c: UpstreamConf, head: UpstreamHead, buffering: boolean, tempPath: string): StoreTarget | undefined {
  if (!c.store || !buffering || head.status !== 200) return undefined;
  const lm = head.headers.lnames.indexOf('last-modified');
  const mtime = lm >= 0 ? parseHttpTime(head.headers.values[lm]) : -1;
  try {
    return new StoreWriter(r, c, createTempFile(tempPath), head.chunked ? -1 : head.contentLength, Number.isNaN(mtime) ? -1 : mtime);
  } catch (err) {
    requestLog(r).crit(`${(err as Error).message}`);
    return undefined;
  }
}

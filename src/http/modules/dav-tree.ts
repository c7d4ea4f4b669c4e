/**
 * The file operations of the dav module, as nginx's core does them
 * (ngx_ext_rename_file, ngx_copy_file, ngx_walk_tree with the dav module's
 * handlers): a failure inside a tree is logged and the walk goes on, as
 * nginx's does (it has no 207 Multi-Status).
 */
import fs from 'node:fs';
import path from 'node:path';
import { sysErrorText } from '../../conf/errors.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';

/** URIs and paths are byte strings (latin1): the file system gets those bytes. */
export const fsPath = (p: string): Buffer => Buffer.from(p, 'latin1');

/** ngx_dir_access: a directory gets x wherever the file access has r. */
export function dirAccess(access: number): number {
  return access | ((access & 0o444) >> 2);
}

/**
 * ngx_http_dav_error: logs `failed "path" failed (errno: text)` and maps the
 * error to a status (`notFound` for a missing file or path; 0 logs only).
 */
export function davError(r: HttpRequest, err: unknown, notFound: number, failed: string, file: string): number {
  const code = (err as NodeJS.ErrnoException).code;
  const log = requestLog(r);
  const text = `${failed} "${file}" failed ${sysErrorText(err)}`;
  if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ENAMETOOLONG') {
    log.error(text);
    return notFound;
  }
  if (code === 'EACCES' || code === 'EPERM') {
    log.error(text);
    return 403;
  }
  if (code === 'EEXIST') {
    log.error(text);
    return 405;
  }
  log.crit(text);
  return code === 'ENOSPC' ? 507 : 500;
}

/** Removes a file, or a directory with everything in it; 0 when done, else a status. */
export function deletePath(r: HttpRequest, file: string, dir: boolean): number {
  if (dir) walk(r, file, { file: removeFile, dir: { pre: () => undefined, post: removeDir }, special: removeFile });
  try {
    if (dir) fs.rmdirSync(fsPath(file));
    else fs.unlinkSync(fsPath(file));
    return 0;
  } catch (err) {
    return davError(r, err, 404, dir ? 'rmdir()' : 'unlink()', file);
  }
}

function removeFile(r: HttpRequest, file: string): void {
  try { fs.unlinkSync(fsPath(file)); } catch (err) { davError(r, err, 0, 'unlink()', file); }
}

function removeDir(r: HttpRequest, dir: string): void {
  try { fs.rmdirSync(fsPath(dir)); } catch (err) { davError(r, err, 0, 'rmdir()', dir); }
}

interface TreeHandlers {
  file(r: HttpRequest, file: string, st: fs.Stats): void;
  dir: { pre(r: HttpRequest, dir: string, st: fs.Stats): void; post(r: HttpRequest, dir: string, st: fs.Stats): void };
  special(r: HttpRequest, file: string, st: fs.Stats): void;
}

/** ngx_walk_tree: what readdir says is a file, a directory (walked), or anything else (links, sockets). */
function walk(r: HttpRequest, dir: string, h: TreeHandlers): void {
  let entries: fs.Dirent<Buffer>[];
  try {
    entries = fs.readdirSync(fsPath(dir), { withFileTypes: true, encoding: 'buffer' });
  } catch (err) {
    requestLog(r).crit(`opendir() "${dir}" failed ${sysErrorText(err)}`);
    return;
  }
  for (const e of entries) {
    const full = `${dir}/${e.name.toString('latin1')}`;
    let st: fs.Stats;
    try {
      st = fs.lstatSync(fsPath(full));
    } catch (err) {
      requestLog(r).crit(`lstat() "${full}" failed ${sysErrorText(err)}`);
      continue;
    }
    if (e.isFile()) h.file(r, full, st);
    else if (e.isDirectory()) {
      h.dir.pre(r, full, st);
      walk(r, full, h);
      h.dir.post(r, full, st);
    } else h.special(r, full, st);
  }
}

/** Copies the tree under `src` into the existing directory `dst`: files with their access and time, directories with theirs. */
export function copyTree(r: HttpRequest, src: string, dst: string): void {
  const to = (p: string) => dst + p.slice(src.length);
  walk(r, src, {
    file: (rr, file, st) => void copyFile(rr, file, to(file), st.mode & 0o777, st.mtimeMs / 1000),
    dir: {
      pre(rr, d, st) {
        try { fs.mkdirSync(fsPath(to(d)), { mode: dirAccess(st.mode & 0o777) }); } catch (err) { davError(rr, err, 0, 'mkdir()', to(d)); }
      },
      post(rr, d, st) {
        try { fs.utimesSync(fsPath(to(d)), st.mtimeMs / 1000, st.mtimeMs / 1000); } catch (err) {
          requestLog(rr).alert(`utimes() "${to(d)}" failed ${sysErrorText(err)}`);
        }
      },
    },
    special: () => undefined,
  });
}

/** ngx_copy_file: `to` is created or truncated with `access`, gets the bytes and `mtime` (seconds; -1 keeps now). */
export function copyFile(r: HttpRequest, from: string, to: string, access: number, mtime: number): boolean {
  const log = requestLog(r);
  let fd = -1;
  try {
    fs.copyFileSync(fsPath(from), fsPath(to));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    log.crit(`${e.syscall === 'open' || e.path === from ? 'open()' : 'copy'} "${e.path === from ? from : to}" failed ${sysErrorText(err)}`);
    return false;
  }
  try {
    fd = fs.openSync(fsPath(to), 'r');
    fs.fchmodSync(fd, access);
    if (mtime !== -1) fs.futimesSync(fd, mtime, mtime);
    return true;
  } catch (err) {
    log.alert(`utimes() "${to}" failed ${sysErrorText(err)}`);
    return true;
  } finally {
    if (fd >= 0) fs.closeSync(fd);
  }
}

export interface RenameOptions {
  /** chmod the file before it moves (0: leave it). */
  access: number;
  /** Access of directories made for it (with createPath). */
  pathAccess: number;
  /** Its mtime in seconds, -1 to leave it. */
  time: number;
  createPath: boolean;
  /** Remove `from` if it could not be moved. */
  deleteFile: boolean;
}

/** ngx_ext_rename_file: rename, making missing directories when asked, copying across file systems. */
export function renameFile(r: HttpRequest, from: string, to: string, o: RenameOptions): boolean {
  const log = requestLog(r);
  const failed = (err: unknown): boolean => {
    if (o.deleteFile) fs.rmSync(fsPath(from), { force: true });
    if (err !== undefined) log.crit(`rename() "${from}" to "${to}" failed ${sysErrorText(err)}`);
    return false;
  };
  try {
    if (o.access) fs.chmodSync(fsPath(from), o.access);
    if (o.time !== -1) fs.utimesSync(fsPath(from), o.time, o.time);
  } catch (err) {
    log.crit(`${o.access ? 'chmod()' : 'utimes()'} "${from}" failed ${sysErrorText(err)}`);
    return failed(undefined);
  }
  try {
    fs.renameSync(fsPath(from), fsPath(to));
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EXDEV') return crossDevice(r, from, to, o) || failed(undefined);
    if (code !== 'ENOENT' || !o.createPath) return failed(err);
  }
  try {
    fs.mkdirSync(fsPath(path.dirname(to)), { recursive: true, mode: dirAccess(o.pathAccess) });
  } catch (err) {
    log.crit(`mkdir() "${to}" failed ${sysErrorText(err)}`);
    return failed(undefined);
  }
  try {
    fs.renameSync(fsPath(from), fsPath(to));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EXDEV') return crossDevice(r, from, to, o) || failed(undefined);
    return failed(err);
  }
}

/** Another file system: copy beside the target, rename over it, remove the source. */
function crossDevice(r: HttpRequest, from: string, to: string, o: RenameOptions): boolean {
  const temp = `${to}.${String(Math.floor(Math.random() * 1e10)).padStart(10, '0')}`;
  const st = fs.statSync(fsPath(from));
  if (!copyFile(r, from, temp, o.access || (st.mode & 0o777), o.time)) return false;
  try {
    fs.renameSync(fsPath(temp), fsPath(to));
  } catch (err) {
    requestLog(r).crit(`rename() "${temp}" to "${to}" failed ${sysErrorText(err)}`);
    fs.rmSync(fsPath(temp), { force: true });
    return false;
  }
  fs.rmSync(fsPath(from), { force: true });
  return true;
}

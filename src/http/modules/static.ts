/**
 * ngx_http_static_module: answers GET/HEAD with the file the URI maps to
 * (root/alias), 301 for a directory without its slash, and nginx's 403/404
 * with its error log lines. Files are streamed with backpressure, never read
 * whole into memory; ranges (range.ts) read only the bytes asked for.
 */
import fs from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { cancelBodyDrain, waitBodyDrain } from '../body-filter.ts';
import { sysErrorText } from '../../conf/errors.ts';
import { DECLINED, DONE } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { endBody, sendBody, sendHeader } from '../response.ts';
import { escapeUri } from '../uri.ts';
import { mapUriToPath, rememberPrefix } from '../core/root.ts';
import { coreLoc } from '../core/settings.ts';
import { failedCall, symlinkRefusal } from '../core/disable-symlinks.ts';
import { contentTypeFor } from '../core/types.ts';
import { allowRanges, rangePlan } from './range.ts';
import { bodyReplaced } from './not-modified.ts';

const OPEN_FLAGS = fs.constants.O_RDONLY | fs.constants.O_NONBLOCK;

/** Files up to this size are read with one read(2) and sent in one write. */
const SMALL_FILE = 64 * 1024;
/** Read size when streaming larger files. */
const CHUNK = 128 * 1024;

export interface OpenedFile {
  fh: FileHandle;
  stat: fs.Stats;
}

/**
 * Opens `path` for reading and stats it (one open, one fstat, as nginx's
 * ngx_open_cached_file). Returns the error instead of throwing.
 */
export async function openFile(path: string): Promise<OpenedFile | NodeJS.ErrnoException> {
  let fh: FileHandle;
  try {
    fh = await fs.promises.open(path, OPEN_FLAGS);
  } catch (err) {
    return err as NodeJS.ErrnoException;
  }
  try {
    return { fh, stat: await fh.stat() };
  } catch (err) {
    await fh.close().catch(() => undefined);
    return err as NodeJS.ErrnoException;
  }
}

/** nginx's answer and log level for a failed open() (ngx_http_static_handler). */
function openFailure(r: HttpRequest, err: NodeJS.ErrnoException, path: string): number {
  const log = requestLog(r);
  const text = `${failedCall(err, 'open()')} "${path}" failed ${sysErrorText(err)}`;
  switch (err.code) {
    case 'ENOENT': case 'ENOTDIR': case 'ENAMETOOLONG':
      if (r.level.get(coreLoc).logNotFound ?? true) log.error(text);
      return 404;
    case 'EACCES': case 'EMLINK': case 'ELOOP':
      log.error(text);
      return 403;
    default:
      log.crit(text);
      return 500;
  }
}

/** nginx's ETag for a file: `"<mtime hex>-<size hex>"` (ngx_http_set_etag). */
export function fileEtag(mtimeSec: number, size: number): string {
  return `"${mtimeSec.toString(16)}-${size.toString(16)}"`;
}

async function staticHandler(r: HttpRequest): Promise<number> {
  const method = r.method;
  if (method !== 'GET' && method !== 'HEAD' && method !== 'POST') return 405;
  if (r.uri.endsWith('/')) return DECLINED;
  const { path } = mapUriToPath(r);
  const refusal = symlinkRefusal(r, path);
  const refused = refusal && await refusal;
  if (refused) return openFailure(r, refused, path);
  const opened = await openFile(path);
  if (!('fh' in opened)) return openFailure(r, opened, path);
  const { fh, stat } = opened;
  if (stat.isDirectory()) {
    await fh.close().catch(() => undefined);
    // `/dir` → `/dir/`; the head filter makes the Location absolute
    r.location = escapeUri(r.uri) + '/' + (r.args ? `?${r.args}` : '');
    return 301;
  }
  if (!stat.isFile()) {
    await fh.close().catch(() => undefined);
    requestLog(r).crit(`"${path}" is not a regular file`);
    return 404;
  }
  if (method === 'POST') {
    await fh.close().catch(() => undefined);
    return 405;
  }
  return sendFile(r, opened);
}

/**
 * Answers 200 with an opened regular file: length, Last-Modified, ETag, the
 * URI's type, ranges, then the body (ngx_http_static_handler's tail, which
 * gzip_static repeats with `Content-Encoding`). Closes the file.
 */
export async function sendFile(r: HttpRequest, { fh, stat }: OpenedFile, contentEncoding?: string, ranges = true): Promise<number> {
  let handedOver = false;
  try {
    const core = r.level.get(coreLoc);
    const mtime = Math.floor(stat.mtimeMs / 1000);
    r.status = 200;
    r.contentLength = stat.size;
    r.lastModified = mtime * 1000;
    if (core.etag) r.addHeader('ETag', fileEtag(mtime, stat.size));
    r.contentType = contentTypeFor(r);
    if (contentEncoding !== undefined) r.addHeader('Content-Encoding', contentEncoding);
    if (ranges) allowRanges(r);
    await sendHeader(r);
    handedOver = true;
    await sendFileBody(r, fh, stat.size);
    return DONE;
  } finally {
    if (!handedOver) await fh.close().catch(() => undefined);
  }
}

/** Sends the body of an opened file after the head (whole, one range, or multipart ranges); closes it. */
export async function sendFileBody(r: HttpRequest, fh: FileHandle, size: number): Promise<void> {
  try {
    if (r.method === 'HEAD' || r.status === 304 || r.status === 204 || bodyReplaced(r)) {
      endBody(r);
      return;
    }
    const plan = rangePlan(r);
    if (!plan) {
      await sendFileRange(r, fh, 0, size);
    } else {
      for (const part of plan.parts) {
        if (part.head) sendBody(r, Buffer.from(part.head, 'latin1'));
        if (!(await sendFileRange(r, fh, part.start, part.end))) return;
      }
      if (plan.tail) sendBody(r, Buffer.from(plan.tail, 'latin1'));
    }
    if (!r.sink.destroyed) endBody(r);
  } catch (err) {
    requestLog(r).crit(`read() failed ${sysErrorText(err)}`);
    r.sink.abort();
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** Sends bytes [start, end) of the file through the body filters, waiting for drain; false when the client went away. */
async function sendFileRange(r: HttpRequest, fh: FileHandle, start: number, end: number): Promise<boolean> {
  const total = end - start;
  if (total <= 0) return true;
  if (total <= SMALL_FILE) {
    const buf = Buffer.allocUnsafe(total);
    const { bytesRead } = await fh.read(buf, 0, total, start);
    if (bytesRead < total) return truncated(r);
    sendBody(r, buf);
    return !r.sink.destroyed;
  }
  let pos = start;
  while (pos < end) {
    if (r.sink.destroyed) return false;
    const want = Math.min(CHUNK, end - pos);
    const buf = Buffer.allocUnsafe(want);
    const { bytesRead } = await fh.read(buf, 0, want, pos);
    if (bytesRead === 0) return truncated(r);
    pos += bytesRead;
    const chunk = bytesRead === want ? buf : buf.subarray(0, bytesRead);
    if (!sendBody(r, chunk) && !(await drained(r))) return false;
  }
  return true;
}

/** The file shrank while being sent: nginx logs it and drops the connection. */
function truncated(r: HttpRequest): boolean {
  requestLog(r).alert('file was truncated while it was being sent');
  r.sink.abort();
  return false;
}

/** Waits until the body filters can take more; resolves false if the response closes first. */
function drained(r: HttpRequest): Promise<boolean> {
  return new Promise((resolve) => {
    const finish = (ok: boolean) => {
      cancelBodyDrain(r, onDrain);
      r.sink.offClose(onClose);
      resolve(ok);
    };
    const onDrain = () => finish(true);
    const onClose = () => finish(false);
    waitBodyDrain(r, onDrain);
    r.sink.onClose(onClose);
  });
}

export const staticModule: HttpModule = {
  name: 'ngx_http_static_module',
  directives: [],
  initCycle: rememberPrefix,
  postconfiguration(http) {
    // last of nginx's content phase handlers: index 100, autoindex 200, gzip_static 250, static 300
    http.addPhaseHandler('CONTENT', 300, staticHandler);
  },
};

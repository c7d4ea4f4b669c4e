/**
 * A cache file: what nginx keeps (ngx_http_file_cache_header_t, the
 * `KEY: ` line, the upstream's response head as received, the body), in a
 * form of our own: one JSON line with the validity and validators, the
 * `KEY:` line, the head, the decoded body. Files are written to a
 * temporary name and renamed into place, so a reader never sees half a file
 * (nginx does the same with its temp files).
 */
import fs from 'node:fs';
import path from 'node:path';

export interface CacheMeta {
  /** Epoch ms until which the response is fresh. */
  validUntil: number;
  /** The upstream head as received (status line and fields, ending with the blank line). */
  headLen: number;
  lastModified?: string;
  etag?: string;
  /** The response's Vary field and the request values it was stored for (vary.ts). */
  vary?: string;
  variant?: string;
  /** `Cache-Control: stale-if-error=N` of the stored response, in seconds. */
  staleIfError?: number;
  /** `Cache-Control: stale-while-revalidate=N`, in seconds. */
  staleWhileRevalidate?: number;
  /** An intercepted error status stored instead of a response (nginx's node->error). */
  error?: number;
}

export interface CacheFile {
  meta: CacheMeta;
  head: string;
  body: Buffer;
}

/** Reads a cache file; undefined when it is missing or unreadable. */
export function readCacheFile(file: string): CacheFile | undefined {
  let data: Buffer;
  try {
    data = fs.readFileSync(file);
  } catch {
    return undefined;
  }
  const nl = data.indexOf(10);
  if (nl < 0) return undefined;
  let meta: CacheMeta;
  try {
    meta = JSON.parse(data.toString('latin1', 0, nl)) as CacheMeta;
  } catch {
    return undefined;
  }
  const keyEnd = data.indexOf(10, nl + 1);
  if (keyEnd < 0) return undefined;
  const headAt = keyEnd + 1;
  const head = data.toString('latin1', headAt, headAt + meta.headLen);
  return { meta, head, body: data.subarray(headAt + meta.headLen) };
}

/** The part of a cache file before the body. */
export function fileHeader(meta: CacheMeta, key: string, head: string): Buffer {
  return Buffer.from(`${JSON.stringify(meta)}\nKEY: ${key}\n${head}`, 'latin1');
}

/** Rewrites the validity of a stored file in place of the old one (after a revalidation). */
export function rewriteMeta(file: string, f: CacheFile, key: string, tmp: string): boolean {
  try {
    fs.writeFileSync(tmp, Buffer.concat([fileHeader(f.meta, key, f.head), f.body]));
    fs.renameSync(tmp, file);
    return true;
  } catch {
    fs.rm(tmp, { force: true }, () => undefined);
    return false;
  }
}

/** Moves a finished temporary file into place, creating the level directories. */
export function commitFile(tmp: string, file: string): boolean {
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.renameSync(tmp, file);
    return true;
  } catch {
    fs.rm(tmp, { force: true }, () => undefined);
    return false;
  }
}

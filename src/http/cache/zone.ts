/**
 * A cache zone (nginx's ngx_http_file_cache_t): the keys live in a shared
 * zone every worker thread sees (src/core/shared-zone.ts), the responses in
 * files on disk in nginx's layout — the file is named by the MD5 of the key
 * in hex, under directories taken from the end of that name as `levels=`
 * says (`levels=1:2`: `path/c/29/b7f54b2df7773722d382f4809d65029c`).
 *
 * Entries in the table (three numbers each):
 *   md5 (16 bytes)      valid-until (epoch ms, 0: no file yet), last use (epoch ms), body file size
 *   'U' + md5           uses (for proxy_cache_min_uses), updating-until (epoch ms: a request is fetching it), 0
 *   '#total'            bytes of all files, for max_size
 * Entries unused for `inactive` are dropped with their files, least
 * recently used first, when a response is stored; so are the oldest ones
 * while the total is over `max_size` (nginx's cache manager does this in
 * the background; here the storing request does it).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { SharedTable, ZoneDecl } from '../../core/shared-zone.ts';

export const CACHE_TAG = 'proxy_cache';

export interface CacheZone {
  name: string;
  path: string;
  /** Directory name lengths from the end of the hex name (`levels=1:2`: [1, 2]). */
  levels: number[];
  inactiveMs: number;
  maxSize: number;
  /** Where temporary files are written before being renamed into place. */
  tempPath: string;
  table: SharedTable;
}

export type CacheZoneDecl = ZoneDecl<CacheZone>;

export function md5(key: string): Buffer {
  return crypto.createHash('md5').update(key, 'latin1').digest();
}

/** The file of a key, in nginx's layout. */
export function filePath(z: CacheZone, digest: Buffer): string {
  const hex = digest.toString('hex');
  const parts = [z.path];
  let end = hex.length;
  for (const n of z.levels) {
    parts.push(hex.slice(end - n, end));
    end -= n;
  }
  parts.push(hex);
  return path.join(...parts);
}

export interface EntryState {
  /** Valid-until in epoch ms; 0 when nothing is stored. */
  validUntil: number;
  uses: number;
  /** Another request is fetching this key right now. */
  updating: boolean;
}

function slotOf(t: SharedTable, key: string, create: boolean): number {
  const h = t.prepare(key);
  let s = t.find(h);
  if (s === 0 && create) s = t.insert(h);
  return s;
}

/**
 * Looks a key up and counts the use (nginx's ngx_http_file_cache_exists):
 * an entry unused for longer than `inactive` is dropped first.
 */
export function lookup(z: CacheZone, digest: Buffer): EntryState {
  const t = z.table;
  const now = Date.now();
  const k = digest.toString('latin1');
  t.lock();
  try {
    let s = slotOf(t, k, false);
    const f = t.f64;
    if (s !== 0 && now - f[t.values(s) + 1] > z.inactiveMs) {
      dropLocked(z, s, digest);
      s = 0;
    }
    let validUntil = 0;
    if (s !== 0) {
      const v = t.values(s);
      validUntil = f[v];
      f[v + 1] = now;
      t.touch(s);
    }
    const u = slotOf(t, 'U' + k, true);
    if (u === 0) return { validUntil, uses: 1, updating: false };
    const uv = t.values(u);
    f[uv]++;
    f[uv + 1] = now;
    return { validUntil, uses: f[uv], updating: f[uv + 2] > now };
  } finally {
    t.unlock();
  }
}

/** Marks the key as being fetched (for `proxy_cache_use_stale updating` and proxy_cache_lock). */
export function setUpdating(z: CacheZone, digest: Buffer, ms: number): void {
  const t = z.table;
  t.lock();
  try {
    const u = slotOf(t, 'U' + digest.toString('latin1'), true);
    if (u !== 0) t.f64[t.values(u) + 2] = ms ? Date.now() + ms : 0;
  } finally {
    t.unlock();
  }
}

/** Extends a stored entry's validity (a revalidated response). */
export function revalidate(z: CacheZone, digest: Buffer, validUntil: number): void {
  const t = z.table;
  t.lock();
  try {
    const s = slotOf(t, digest.toString('latin1'), false);
    if (s !== 0) t.f64[t.values(s)] = validUntil;
  } finally {
    t.unlock();
  }
}

/** Records a file just renamed into place, then drops inactive entries and trims to max_size. */
export function stored(z: CacheZone, digest: Buffer, validUntil: number, size: number): void {
  const t = z.table;
  const now = Date.now();
  t.lock();
  try {
    const s = slotOf(t, digest.toString('latin1'), true);
    const total = slotOf(t, '#total', true);
    const f = t.f64;
    if (s === 0 || total === 0) return;
    const v = t.values(s);
    const tv = t.values(total);
    f[tv] += size - f[v + 2];
    f[v] = validUntil;
    f[v + 1] = now;
    f[v + 2] = size;
    // the total's own entry must never look inactive or old
    f[tv + 1] = Number.MAX_SAFE_INTEGER;
    t.touch(s);
    t.touch(total);
    expire(z, now);
  } finally {
    t.unlock();
  }
}

/** Forgets a key and removes its file (a response that may no longer be cached). */
export function remove(z: CacheZone, digest: Buffer): void {
  const t = z.table;
  t.lock();
  try {
    const s = slotOf(t, digest.toString('latin1'), false);
    if (s !== 0) dropLocked(z, s, digest);
  } finally {
    t.unlock();
  }
}

function dropLocked(z: CacheZone, slot: number, digest: Buffer): void {
  const t = z.table;
  const total = slotOf(t, '#total', false);
  if (total !== 0) t.f64[t.values(total)] -= t.f64[t.values(slot) + 2];
  t.remove(slot);
  fs.rm(filePath(z, digest), { force: true }, () => undefined);
}

/** Drops least recently used entries that are inactive, or while the total is over max_size. */
function expire(z: CacheZone, now: number): void {
  const t = z.table;
  const f = t.f64;
  const total = slotOf(t, '#total', false);
  for (let n = 0; n < 100; n++) {
    const s = t.oldest();
    if (s === 0 || s === total) return;
    const v = t.values(s);
    const over = z.maxSize > 0 && total !== 0 && f[t.values(total)] > z.maxSize;
    if (!over && now - f[v + 1] <= z.inactiveMs) return;
    const key = keyOf(t, s);
    if (key.length === 16) dropLocked(z, s, Buffer.from(key, 'latin1'));
    else t.remove(s);
  }
}

/** The key bytes of a slot (16 for a file entry, 17 for a uses entry). */
function keyOf(t: SharedTable, slot: number): string {
  return t.keyAt(slot);
}

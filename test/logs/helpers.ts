// Helpers for the log tests: waiting for log lines, reading gzip'ed logs,
// and running one scenario against Gatehouse and Debian's nginx.

import * as fs from 'node:fs';
import * as zlib from 'node:zlib';
import type { RunningServer } from '../kit/server.ts';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Raw bytes of a file under the prefix (empty when missing). */
export function readBytes(srv: RunningServer, rel: string): Buffer {
  try {
    return fs.readFileSync(srv.path(rel));
  } catch {
    return Buffer.alloc(0);
  }
}

/** Lines of a log file as byte strings (latin1), without the final newline. */
export function lines(srv: RunningServer, rel: string): string[] {
  const text = readBytes(srv, rel).toString('latin1');
  if (text === '') return [];
  const out = text.split('\n');
  if (out.at(-1) === '') out.pop();
  return out;
}

/** Waits until `rel` has at least `n` lines; returns them (whatever is there after timeoutMs). */
export async function waitLines(srv: RunningServer, rel: string, n: number, timeoutMs = 5000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = lines(srv, rel);
    if (got.length >= n || Date.now() >= deadline) return got;
    await sleep(20);
  }
}

/** Every gzip member of a file, decompressed and concatenated (what zcat prints). */
export function gunzipAll(data: Buffer): string {
  return data.length === 0 ? '' : zlib.gunzipSync(data).toString('latin1');
}

/** Splits a file into its gzip members (each starts with the magic bytes and a full header). */
export function gzipMembers(data: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let off = 0;
  while (off < data.length) {
    // a member's end is only known by inflating it: inflate, then find where the next one starts
    const rest = data.subarray(off);
    let next = rest.length;
    for (let i = 10; i < rest.length - 1; i++) {
      if (rest[i] === 0x1f && rest[i + 1] === 0x8b) {
        try {
          zlib.gunzipSync(rest.subarray(0, i));
          next = i;
          break;
        } catch { /* not a boundary */ }
      }
    }
    out.push(rest.subarray(0, next));
    off += next;
  }
  return out;
}

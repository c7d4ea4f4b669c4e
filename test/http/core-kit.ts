/**
 * Helpers for the HTTP core's reference tests: Gatehouse and Debian's nginx
 * run one configuration; the same bytes go to both and what comes back is
 * compared as bytes (the Date header and nginx's version masked), together
 * with how the connection ended.
 */
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import { rawExchange } from '../kit/client.ts';
import type { RequestPart } from '../kit/client.ts';
import { nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import type { RunningServer, StartOptions } from '../kit/server.ts';
import { maskServerName } from '../kit/server-name.ts';

export interface Pair {
  gh: RunningServer;
  /** Undefined when Debian's nginx is not installed: tests then check Gatehouse alone. */
  ng: RunningServer | undefined;
}

/** One pair for all tests of a file: started before the first test, stopped after the last. */
export function sharedPair(opts: StartOptions): () => Pair {
  let pair: Pair | undefined;
  before(async () => {
    const gh = await startGatehouse(opts);
    const ng = nginxSkip ? undefined : await startNginx(opts);
    pair = { gh, ng };
  });
  after(async () => {
    await pair?.gh.stop();
    await pair?.ng?.stop();
  });
  return () => pair!;
}

/** Response bytes with what legitimately differs masked: Date values, ports in Location, the server's name. */
export function masked(data: Buffer): string {
  return maskServerName(data.toString('latin1'))
    .replace(/^Date: .*$/gm, 'Date: X')
    .replace(/^(Location: https?:\/\/[^/:\r]+):\d+/gm, '$1:PORT');
}

export interface Answer {
  /** What the client received, masked. */
  text: string;
  /** How the exchange ended: the server closed, reset, or (with a timeout) kept the connection open. */
  end: string;
}

/** Sends `parts` on a fresh connection and reads until the server closes (or `timeoutMs`). */
export async function exchange(srv: RunningServer, parts: RequestPart | RequestPart[], timeoutMs = 3000, port = 8080): Promise<Answer> {
  try {
    const r = await rawExchange(srv.port(port), parts, { timeoutMs });
    return { text: masked(r.data), end: r.end };
  } catch (err) {
    const got = (err as { received?: Buffer }).received;
    if (!got) throw err;
    return { text: masked(got), end: 'open' };
  }
}

/**
 * Sends the same bytes to both servers; asserts nginx's answer is Gatehouse's
 * (when nginx is installed) and returns Gatehouse's.
 */
export async function same(pair: Pair, parts: RequestPart | RequestPart[], timeoutMs = 3000, port = 8080): Promise<Answer> {
  const [mine, ref] = await Promise.all([
    exchange(pair.gh, parts, timeoutMs, port),
    pair.ng ? exchange(pair.ng, parts, timeoutMs, port) : Promise.resolve(undefined),
  ]);
  if (ref) {
    // sent in several writes, a request may arrive after the server read what it answers; if it
    // then closes, the close is a reset or not by timing (nginx resets 24 times in 30, closes 6)
    const racy = Array.isArray(parts) && parts.length > 1;
    const closed = (a: Answer) => (racy && a.end === 'reset' ? { ...a, end: 'close' } : a);
    assert.deepEqual(closed(mine), closed(ref), `same answer as nginx for ${JSON.stringify(parts).slice(0, 120)}`);
  }
  return mine;
}

/** The status code of the first response in `text` ('' for HTTP/0.9 answers without a head). */
export function statusOf(text: string): number {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
  return m ? Number(m[1]) : 0;
}

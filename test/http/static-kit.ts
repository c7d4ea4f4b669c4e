/**
 * Helpers for reference tests of static files, headers, gzip and auth: run
 * Gatehouse and Debian's nginx on one config and compare what a client sees.
 */
import type { TestContext } from 'node:test';
import { parseResponse, rawRequest } from '../kit/client.ts';
import type { ParsedResponse } from '../kit/client.ts';
import type { RunningServer } from '../kit/server.ts';
import { startPair } from '../kit/pair.ts';
import type { Pair } from '../kit/pair.ts';
import { maskNameInResponse } from '../kit/server-name.ts';
export { FIXED_MTIME, startPair } from '../kit/pair.ts';
export type { Pair } from '../kit/pair.ts';

/** Both servers for one test; `ng` is undefined when nginx is not installed. */



/** Sends `request` (with `Host: localhost` unless given) to port `n` of a server. */
export async function ask(srv: RunningServer, request: string, port = 8080): Promise<ParsedResponse> {
  const text = /\r\n\r\n/.test(request) ? request : `${request}\r\nHost: localhost\r\nConnection: close\r\n\r\n`;
  const head = /^HEAD /.test(text);
  return parseResponse(await rawRequest(srv.port(port), text), { head });
}

/** What must match between servers: status, headers in order (Date, boundaries and the server's name masked), body. */
export function comparable(r: ParsedResponse): { status: number; headers: string[]; body: string } {
  const mask = (s: string) => s.replace(/\d{10,}/g, 'BOUNDARY').replace(/max-age=\d+/g, 'max-age=N').replace(/:\d{4,5}\//g, ':PORT/')
    .replace(/\/tmp\/gh-test-\w+/g, 'PREFIX');
  // an Expires computed from now (Date + max-age) is masked too: the two servers may answer in
  // different seconds; a fixed one (epoch, "max", from the file's time) is compared as it is
  const date = Date.parse(r.headers.find(([k]) => k.toLowerCase() === 'date')?.[1] ?? '');
  const maxAge = /max-age=(\d+)/.exec(r.headers.find(([k]) => k.toLowerCase() === 'cache-control')?.[1] ?? '')?.[1];
  const fromNow = (k: string, v: string) => k.toLowerCase() === 'expires' && maxAge !== undefined
    && Date.parse(v) === date + Number(maxAge) * 1000;
  const m = maskNameInResponse(r.headers, r.body.toString('latin1'), r.status);
  return {
    status: r.status,
    headers: m.headers.filter(([k]) => k.toLowerCase() !== 'date')
      .map(([k, v]) => (fromNow(k, v) ? `${k}: DATE+max-age` : mask(`${k}: ${v}`))),
    body: mask(m.body),
  };
}

/** Asks both servers and returns Gatehouse's answer after checking nginx's is the same. */
export async function same(t: TestContext, pair: Pair, request: string, port = 8080): Promise<ParsedResponse> {
  const mine = await ask(pair.gh, request, port);
  if (pair.ng) {
    const ref = await ask(pair.ng, request, port);
    t.assert.deepStrictEqual(comparable(mine), comparable(ref), `same answer as nginx for ${request.split('\r\n')[0]}`);
  }
  return mine;
}

/** Error log lines at `level` and worse that mention `text`, from the server's error.log. */
export function logLines(srv: RunningServer, re: RegExp): string[] {
  return srv.logLines().filter((l) => re.test(l));
}

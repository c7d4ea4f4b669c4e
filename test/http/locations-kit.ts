/**
 * Helpers for the reference tests of locations, rewrite, map and error_page:
 * run Gatehouse and Debian's nginx on one configuration, send both the same
 * request, and compare what a client sees (status, headers in order, body),
 * with the listening ports and nginx's version masked.
 */
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import { parseResponse, rawRequest } from '../kit/client.ts';
import type { ParsedResponse } from '../kit/client.ts';
import type { RunningServer, StartOptions } from '../kit/server.ts';
import { startPair } from '../kit/pair.ts';
import type { Pair } from '../kit/pair.ts';
import { maskNameInResponse } from '../kit/server-name.ts';
export { FIXED_MTIME, startPair } from '../kit/pair.ts';
export type { Pair } from '../kit/pair.ts';




/** One pair for all tests of a file: started before the first, stopped after the last. */
export function sharedPair(opts: StartOptions): () => Pair {
  let pair: Pair | undefined;
  const stops: Array<() => unknown> = [];
  before(async () => {
    pair = await startPair({ after: (fn) => { stops.push(fn); } }, opts);
  });
  after(() => Promise.all(stops.map((stop) => stop())));
  return () => pair!;
}

/** A request line plus headers; `Host: localhost` and `Connection: close` are added unless the text ends the head. */
function requestText(request: string): string {
  return request.endsWith('\r\n\r\n') ? request : `${request}\r\nHost: localhost\r\nConnection: close\r\n\r\n`;
}

export async function ask(srv: RunningServer, request: string, port = 8080): Promise<ParsedResponse> {
  const text = requestText(request);
  return parseResponse(await rawRequest(srv.port(port), text), { head: text.startsWith('HEAD ') });
}

/** What must be equal between the two servers. */
export function comparable(r: ParsedResponse, ports: number[]): { status: number; headers: string[]; body: string } {
  const mask = (s: string) => {
    let out = s;
    for (const p of ports) out = out.replaceAll(`:${p}`, ':PORT');
    return out;
  };
  const m = maskNameInResponse(r.headers, r.body.toString('latin1'), r.status);
  return {
    status: r.status,
    headers: m.headers.filter(([k]) => !/^(date|server)$/i.test(k)).map(([k, v]) => mask(`${k}: ${v}`)),
    body: mask(m.body),
  };
}

/**
 * Sends `request` to both servers and asserts they answer alike; returns
 * Gatehouse's response for further assertions.
 */
export async function same(pair: Pair, request: string, port = 8080): Promise<ParsedResponse> {
  const gh = await ask(pair.gh, request, port);
  if (pair.ng) {
    const ng = await ask(pair.ng, request, port);
    const ports = (srv: RunningServer) => [...srv.ports.values()];
    assert.deepEqual(comparable(gh, ports(pair.gh)), comparable(ng, ports(pair.ng)), `same answer as nginx to ${JSON.stringify(request)}`);
  }
  return gh;
}

/** Error log lines (without the timestamp and pid) matching `re`. */
export function logMatches(srv: RunningServer, re: RegExp): string[] {
  return srv.logLines('error.log').filter((l) => re.test(l)).map((l) => l.replace(/^\S+ \S+ \[(\w+)\] \d+#\d+: (\*\d+ )?/, '[$1] '));
}

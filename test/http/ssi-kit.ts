/**
 * Helpers for the SSI and sub_filter tests: run Gatehouse and Debian's
 * nginx (the reference) on one configuration and compare what a client
 * sees; an upstream that sends a body in small pieces, so filters meet
 * every boundary.
 */
import type { TestContext } from 'node:test';
import type net from 'node:net';
import { parseResponse, rawRequest } from '../kit/client.ts';
import type { ParsedResponse } from '../kit/client.ts';
import type { RunningServer } from '../kit/server.ts';
import { RawUpstream } from '../proxy/upstream-kit.ts';
import { startPair } from '../kit/pair.ts';
import type { Pair } from '../kit/pair.ts';
import { maskNameInResponse } from '../kit/server-name.ts';
export { FIXED_MTIME, startPair } from '../kit/pair.ts';
export type { Pair } from '../kit/pair.ts';




/** GET (or the given request line) on port 8080 of `srv`, HTTP/1.1 with Connection: close unless a whole request is given. */
export async function ask(srv: RunningServer, request: string, port = 8080): Promise<ParsedResponse> {
  const text = request.includes('\r\n\r\n') ? request
    : `${/^[A-Z]+ /.test(request) ? request : `GET ${request} HTTP/1.1`}\r\nHost: localhost\r\nConnection: close\r\n\r\n`;
  return parseResponse(await rawRequest(srv.port(port), text), { head: text.startsWith('HEAD ') });
}

/** Status, headers in order (Date left out, the server's name masked) and the de-chunked body. */
export function comparable(r: ParsedResponse): { status: number; headers: string[]; body: string } {
  const m = maskNameInResponse(r.headers, r.body.toString('latin1'), r.status);
  return {
    status: r.status,
    headers: m.headers.filter(([k]) => k.toLowerCase() !== 'date').map(([k, v]) => `${k}: ${v}`),
    body: m.body,
  };
}

/** Asks both servers; checks that nginx answered the same; returns Gatehouse's answer. */
export async function same(t: TestContext, pair: Pair, request: string, port = 8080): Promise<ParsedResponse> {
  const mine = await ask(pair.gh, request, port);
  if (pair.ng) {
    const ref = await ask(pair.ng, request, port);
    t.assert.deepStrictEqual(comparable(mine), comparable(ref), `same answer as nginx for ${request.split('\r\n')[0]}`);
  }
  return mine;
}

/** Error log lines of `srv` matching `re`. */
export function errorLines(srv: RunningServer, re: RegExp): string[] {
  return srv.logLines().filter((l) => re.test(l));
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * An upstream that answers every request with `body(uri)` in pieces of
 * `piece` bytes, one write each, a few milliseconds apart (so a proxy with
 * proxy_buffering off passes them on one by one); no Content-Length, the
 * end of the body is the end of the connection.
 */
export async function piecewiseUpstream(t: TestContext, body: (uri: string) => string, piece = 1, type = 'text/html'): Promise<RawUpstream> {
  const up = await RawUpstream.start(async (req, socket: net.Socket) => {
    socket.setNoDelay(true);
    const data = Buffer.from(body(req.uri), 'latin1');
    socket.write(`HTTP/1.1 200 OK\r\nContent-Type: ${type}\r\nConnection: close\r\n\r\n`);
    for (let i = 0; i < data.length && !socket.destroyed; i += piece) {
      await pause(2);
      socket.write(data.subarray(i, i + piece));
    }
    socket.end();
  });
  t.after(() => up.close());
  return up;
}

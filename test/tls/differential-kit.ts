/**
 * Helpers for the TLS differential tests: run one client scenario against
 * Gatehouse and Debian's nginx started on the same configuration
 * (test/kit/pair.ts) and reduce what the client saw to plain values that
 * can be compared (handshake alert, certificate, protocol, response).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { isDeepStrictEqual } from 'node:util';
import type { Pair } from '../kit/pair.ts';
import type { RunningServer } from '../kit/server.ts';
import { tlsExchange } from './client.ts';
import type { TlsClientOptions, TlsExchange } from './client.ts';
import { maskServerName } from '../kit/server-name.ts';

/** What a client saw, reduced to comparable values. */
export interface Seen {
  /** `alert N` (the TLS alert the server sent) or the socket error's code. */
  error?: string;
  /** The subject of the server certificate, e.g. `CN=a.test`. */
  cert?: string;
  keyType?: string;
  protocol?: string | null;
  reused?: boolean;
  /** The response as received (status line, headers without Date, body). */
  response?: string;
  /** A stapled OCSP response was received. */
  stapled?: boolean;
}

/** The response bytes without `Date` and `Server` and with the server's name masked (they differ between runs and servers). */
export function normalizeResponse(data: Buffer): string {
  return maskServerName(data.toString('latin1')).replace(/^Date: .*\r\n/im, '').replace(/^Server: .*\r\n/im, '');
}

export function seen(x: TlsExchange, opts: { withHeaders?: boolean } = {}): Seen {
  const out: Seen = {};
  if (x.error) {
    const alert = /alert number (\d+)/.exec(x.error);
    out.error = alert ? `alert ${alert[1]}` : (/\b(E[A-Z]+)\b/.exec(x.error)?.[1] ?? x.error);
    return out;
  }
  out.cert = x.peer?.subject.replace(/\n/g, ',');
  out.keyType = x.peer?.publicKey.asymmetricKeyType;
  out.protocol = x.protocol;
  out.reused = x.reused;
  out.stapled = x.ocsp !== undefined;
  const text = normalizeResponse(x.data);
  out.response = opts.withHeaders ? text : text.slice(text.indexOf('\r\n\r\n') + 4);
  return out;
}

/** `fn` run against Gatehouse and (when installed) nginx, one after the other. */
export async function both<T>(pair: Pair, fn: (srv: RunningServer) => Promise<T>): Promise<{ gh: T; ng: T | undefined }> {
  const gh = await fn(pair.gh);
  const ng = pair.ng ? await fn(pair.ng) : undefined;
  return { gh, ng };
}

/** Asserts Gatehouse saw what nginx saw (when nginx runs), and returns Gatehouse's value for further checks. */
export async function same<T>(pair: Pair, what: string, fn: (srv: RunningServer) => Promise<T>): Promise<T> {
  const { gh, ng } = await both(pair, fn);
  if (!pair.ng) return gh;
  // TLS_DIFF_REPORT=1 lists every difference instead of stopping at the first (for investigating)
  if (process.env.TLS_DIFF_REPORT) {
    if (!isDeepStrictEqual(gh, ng)) console.log(`DIFF ${what}:\n  gatehouse: ${JSON.stringify(gh)}\n  nginx:     ${JSON.stringify(ng)}`);
    return ng as T;
  }
  assert.deepEqual(gh, ng, `${what}: Gatehouse (actual) vs nginx (expected)`);
  return gh;
}

/** One TLS exchange with `srv`'s port `port` (a %%PORT_n%% number), reduced with seen(). */
export async function exchange(srv: RunningServer, port: number, opts: TlsClientOptions = {}, withHeaders = false): Promise<Seen> {
  return seen(await tlsExchange(srv.port(port), opts), { withHeaders });
}

/**
 * error.log lines matching `re`, without the time, pid/thread and
 * connection number, with the prefix and ports replaced by placeholders.
 */
export function logLines(srv: RunningServer, re: RegExp, file = 'error.log'): string[] {
  return srv.logLines(file).filter((l) => re.test(l)).map((l) => normalizeLog(srv, l));
}

export function normalizeLog(srv: RunningServer, line: string): string {
  let s = line.replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d /, '').replace(/\d+#\d+: (\*\d+ )?/, '');
  s = s.split(srv.prefix).join('PREFIX');
  for (const [name, port] of srv.ports) s = s.split(`:${port}`).join(`:PORT_${name}`);
  return s;
}

/** Waits until error.log has a line matching `re` (nginx's workers write asynchronously). */
export async function waitLog(srv: RunningServer, re: RegExp): Promise<string[]> {
  await srv.waitForLog('error.log', re, 3000).catch(() => undefined);
  return logLines(srv, re);
}

/** Runs `openssl` with `args` and `input` on stdin; resolves with stdout+stderr (never rejects). */
export function openssl(args: string[], input = ''): Promise<string> {
  return new Promise((resolve) => {
    const child = execFile('openssl', args, { timeout: 5000, encoding: 'latin1' }, (_err, stdout, stderr) => resolve(`${stdout}${stderr}`));
    child.stdin?.end(input);
  });
}

/**
 * A differential harness for the proxy: Gatehouse and Debian's nginx run the
 * same configuration against the same scripted upstreams on loopback, get the
 * same raw requests one after the other, and what each exchange produced is
 * recorded in one comparable form: the bytes every upstream received (in
 * arrival order, by upstream name), the client's bytes, the access-log lines
 * and the error-log lines of level warn and above. Values that differ by
 * nature (times, dates, versions, ports of the two servers, connection
 * numbers) are normalised to their format.
 */
import fs from 'node:fs';
import net from 'node:net';
import { rawExchange } from '../kit/client.ts';
import type { RequestPart } from '../kit/client.ts';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, sleep, startPair } from './upstream-kit.ts';
import type { Pair, UpstreamRequest } from './upstream-kit.ts';
import { maskNameInPageLength, maskServerName, signIn } from '../kit/server-name.ts';

/** What an upstream does with a request: bytes to send and close, or a scripted action. */
export type Script = string | ((req: UpstreamRequest, socket: net.Socket, upstream: string) => void | Promise<void>);

/** Every upstream variable nginx logs, plus what the request looked like after rewrites. */
export const LOG_FORMAT = `log_format diff '$status $body_bytes_sent "$request" uri=$uri args=$args '
        'ua="$upstream_addr" us="$upstream_status" url="$upstream_response_length" '
        'ubr="$upstream_bytes_received" ubs="$upstream_bytes_sent" uct="$upstream_connect_time" '
        'uht="$upstream_header_time" urt="$upstream_response_time" ph="$proxy_host" pp="$proxy_port" '
        'uhx="$upstream_http_x_up"';`;

/** http-level lines for a differential config: the log format, logs and temp paths in the prefix. */
export const DIFF_HTTP = `    ${LOG_FORMAT}\n${HTTP_COMMON.replace('access.log;', 'access.log diff;')}`;

export interface Observation {
  /** `name: head+body` of every request an upstream received, in arrival order. */
  upstream: string[];
  response: string;
  /** How the client connection ended. */
  end: string;
  /** What the client had received `snapshotMs` after sending (when asked). */
  early?: string;
  access: string[];
  errors: string[];
}

export interface ExchangeOptions {
  /** Read until the server closes (default) or one response is complete. */
  untilClose?: boolean;
  timeoutMs?: number;
  /** Record what had arrived this long after the request was sent. */
  snapshotMs?: number;
  /** Access-log lines the exchange writes (default 1). */
  logLines?: number;
  endAfterWrite?: boolean;
}

export class Differential {
  pair!: Pair;
  readonly upstreams = new Map<string, RawUpstream>();
  /** Requests seen by any upstream, with its name, in arrival order. */
  readonly arrivals: string[] = [];
  /** Requests whose body the upstreams do not wait for. */
  headOnly: (head: string) => boolean = () => false;
  /** Scripts by key (the last segment of the request path); `default` answers the rest. */
  scripts: Record<string, Script> = {};

  /** Starts the named upstreams (`unix:` prefixed names listen on a unix socket). */
  async startUpstreams(names: string[]): Promise<void> {
    for (const spec of names) {
      const unix = spec.startsWith('unix:');
      const name = unix ? spec.slice(5) : spec;
      const up = await RawUpstream.start((req, socket) => this.answer(name, req, socket), { unix });
      up.headOnly = (head) => this.headOnly(head);
      this.upstreams.set(name, up);
    }
  }

  /** `127.0.0.1:PORT` or `unix:/path` of an upstream. */
  addr(name: string): string {
    return this.upstreams.get(name)!.address;
  }

  /** Socket path of a unix upstream. */
  sockPath(name: string): string {
    return this.upstreams.get(name)!.path!;
  }

  async start(t: { after(fn: () => unknown): void }, conf: string): Promise<void> {
    this.pair = await startPair(t, { conf });
  }

  async close(): Promise<void> {
    await Promise.all([...this.upstreams.values()].map((u) => u.close()));
  }

  private async answer(name: string, req: UpstreamRequest, socket: net.Socket): Promise<void> {
    this.arrivals.push(`${name}#${req.index}: ${req.head}${req.rawBody.toString('latin1')}`);
    const key = req.uri.replace(/\?.*$/, '').replace(/^.*\//, '');
    const script = this.scripts[key] ?? this.scripts.default ?? `HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok`;
    if (typeof script === 'string') {
      socket.end(script, 'latin1');
      return;
    }
    await script(req, socket, name);
  }

  /** Sends `raw` to one server and records what it caused. */
  async observe(srv: RunningServer, raw: RequestPart | RequestPart[], opts: ExchangeOptions = {}): Promise<Observation> {
    const port = srv.port(8080);
    const from = this.arrivals.length;
    const accessFrom = completeLines(srv, 'access.log').length;
    const errorFrom = srv.logSize('error.log');
    const early = opts.snapshotMs === undefined ? undefined : snapshot(port, raw, opts.snapshotMs);
    const ex = early
      ? await early
      : await rawExchange(port, raw, { untilClose: opts.untilClose, timeoutMs: opts.timeoutMs, endAfterWrite: opts.endAfterWrite });
    const want = opts.logLines ?? 1;
    let access: string[] = [];
    // error lines come before the request's access-log line, in both servers
    for (let waited = 0; waited < 2000; waited += 5) {
      access = completeLines(srv, 'access.log').slice(accessFrom);
      if (access.length >= want) break;
      await sleep(5);
    }
    const norm = (s: string) => normalise(s, port).replaceAll(srv.prefix, 'PREFIX').replace(/_temp\/\d+/g, '_temp/N');
    // LOG_FORMAT's `$status $body_bytes_sent`: a page of the server's own counted with its name masked
    const sign = signIn(ex.data.toString('latin1'));
    const counted = (l: string) => l.replace(/^(\d{3}) (\d+) /, (_m, st: string, b: string) => `${st} ${maskNameInPageLength(Number(st), Number(b), sign)} `);
    const errors = readFrom(srv, errorFrom).split('\n').filter((l) => /\[(warn|error|crit|alert|emerg)\]/.test(l)).map(norm);
    return {
      upstream: this.arrivals.slice(from).map(norm),
      response: norm(maskServerName(ex.data.toString('latin1'))),
      end: ex.end,
      ...('early' in ex ? { early: norm(maskServerName(ex.early)) } : {}),
      access: access.map((l) => norm(counted(l))),
      errors,
    };
  }

  /** The same exchange through Gatehouse, then nginx (when installed). */
  async both(raw: RequestPart | RequestPart[], opts: ExchangeOptions = {}): Promise<{ gh: Observation; ng: Observation | undefined }> {
    const gh = await this.observe(this.pair.gh, raw, opts);
    const ng = this.pair.ng ? await this.observe(this.pair.ng, raw, opts) : undefined;
    return { gh, ng };
  }
}

/** The lines of a log file that are complete (a line being written is left out). */
function completeLines(srv: RunningServer, rel: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(srv.path(rel), 'latin1');
  } catch {
    return [];
  }
  return text.slice(0, text.lastIndexOf('\n') + 1).split('\n').slice(0, -1);
}

/** A log file's text from byte offset `from`. */
function readFrom(srv: RunningServer, from: number): string {
  try {
    return fs.readFileSync(srv.path('error.log')).subarray(from).toString('utf8');
  } catch {
    return '';
  }
}

/** Masks what differs by nature between two runs and two servers; keeps the format. */
export function normalise(text: string, port: number): string {
  return text
    .replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: (\*\d+ )?/, '$1 ')
    .replace(/^Date: .*$/gm, 'Date: -')
    .replaceAll(`:${port}`, ':PORT')
    .replace(/\b\d+\.\d{3}\b/g, 'N.NNN');
}

/** An exchange that also records what arrived within `ms` of sending. */
function snapshot(port: number, raw: RequestPart | RequestPart[], ms: number): Promise<{ data: Buffer; end: string; early: string }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let early = '';
    const sock = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => { early = Buffer.concat(chunks).toString('latin1'); }, ms);
    const stop = setTimeout(() => { sock.destroy(); reject(new Error('snapshot exchange timed out')); }, 5000);
    sock.on('data', (d: Buffer) => chunks.push(d));
    sock.on('error', () => undefined);
    sock.on('close', () => {
      clearTimeout(timer);
      clearTimeout(stop);
      resolve({ data: Buffer.concat(chunks), end: 'close', early });
    });
    sock.on('connect', () => {
      for (const p of Array.isArray(raw) ? raw : [raw]) if (typeof p === 'string' || Buffer.isBuffer(p)) sock.write(p);
    });
  });
}

/**
 * The harness of the request corpus (request-corpus.test.ts): Gatehouse and
 * Debian's nginx proxy to one loopback origin that records the bytes it
 * receives; every case is sent to both servers on a fresh connection, the
 * client half-closes after its last write (so every exchange ends with the
 * server's close, never with a timeout) and what each server caused is kept
 * in one comparable form: the response bytes, how the connection ended, the
 * requests the origin received and the access-log lines. Each case connects
 * from its own loopback address (127.1.x.y), which names it: the proxy passes
 * `$remote_addr $server_port` to the origin, the access log writes
 * `$remote_addr` first (client ports are reused, addresses are not).
 */
import fs from 'node:fs';
import net from 'node:net';
import type { RunningServer } from '../kit/server.ts';
import { maskNameInPageLength, maskServerName, signIn } from '../kit/server-name.ts';

/** One case: the bytes of one connection, in one write or (an array) in several. */
export interface CorpusCase {
  name: string;
  parts: string | string[];
  /** The loopback address the case connects from. */
  from: string;
  /** A difference from nginx not fixed yet: what it is and whose part of the code it is in. */
  todo?: string;
}

export interface Outcome {
  response: string;
  /** 'close', 'reset' (counted as a close when the bytes came in several writes: see `comparable`) or 'still open'. */
  end: string;
  /** Each request the origin received, as received (the X-Client-Port line left out). */
  upstream: string[];
  /** The access-log lines of the connection, without the port. */
  access: string[];
}

const CLIENT_HEADER = /^X-Client: (\S+ \d+)\r\n/m;

/** The address case number `i` connects from. */
export function caseAddress(i: number): string {
  return `127.1.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`;
}

/** A loopback origin that records what each client connection caused, and answers 200 (101 to an upgrade). */
export class RecordingOrigin {
  readonly server = net.createServer({ allowHalfOpen: true }, (s) => this.serve(s));
  /** Requests received, by `client-address server-port` as the proxy named them. */
  readonly received = new Map<string, string[]>();

  async listen(): Promise<number> {
    await new Promise<void>((res) => this.server.listen(0, '127.0.0.1', res));
    return (this.server.address() as net.AddressInfo).port;
  }

  close(): Promise<void> {
    return new Promise((res) => this.server.close(() => res()));
  }

  private serve(socket: net.Socket): void {
    let buf = '';
    let recorded: { list: string[]; at: number } | undefined;
    socket.on('error', () => undefined);
    socket.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      // recorded as it arrives, so a request the proxy gives up on is still seen
      const client = CLIENT_HEADER.exec(buf);
      if (client && !recorded) {
        const list = this.received.get(client[1]) ?? [];
        this.received.set(client[1], list);
        recorded = { list, at: list.push('') - 1 };
      }
      if (recorded) recorded.list[recorded.at] = buf.replace(CLIENT_HEADER, '');
      if (complete(buf)) {
        const upgrade = /^Upgrade:/im.test(buf);
        socket.end(upgrade
          ? 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nswitched\n'
          : 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Origin: yes\r\n\r\nok\n');
      }
    });
    socket.on('end', () => socket.end());
  }
}

/** Whether `text` holds a whole request as a proxy sends it (Content-Length or chunked). */
function complete(text: string): boolean {
  const headEnd = text.indexOf('\r\n\r\n');
  if (headEnd < 0) return false;
  const head = text.slice(0, headEnd);
  const body = text.slice(headEnd + 4);
  if (/^Transfer-Encoding: chunked$/im.test(head)) return /(^|\r\n)0\r\n\r\n$/.test(body);
  const length = /^Content-Length: (\d+)$/im.exec(head);
  return body.length >= (length ? Number(length[1]) : 0);
}

/** What the client saw on one connection. */
export interface ClientExchange {
  data: string;
  end: string;
}

/**
 * Sends the case's parts (each a write, in order, each written once the previous one
 * is handed to the kernel), half-closes, and reads until the server closes
 * (or `timeoutMs` passes: a server that should have closed and did not).
 */
export function exchange(port: number, c: CorpusCase, timeoutMs = 10_000): Promise<ClientExchange> {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1', localAddress: c.from, allowHalfOpen: true });
    sock.setNoDelay(true);
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (end: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ data: Buffer.concat(chunks).toString('latin1'), end });
    };
    // a server that keeps the connection: recorded as such (the comparison shows it), the corpus goes on
    const timer = setTimeout(() => finish('still open'), timeoutMs);
    sock.on('data', (d: Buffer) => chunks.push(d));
    sock.on('end', () => finish('close'));
    sock.on('close', () => finish('close'));
    sock.on('error', () => finish('reset'));
    sock.once('connect', async () => {
      for (const part of Array.isArray(c.parts) ? c.parts : [c.parts]) {
        if (done) return;
        await new Promise<void>((res) => sock.write(Buffer.from(part, 'latin1'), () => res()));
      }
      if (!done) sock.end();
    });
  });
}

/** Response bytes with what differs by nature masked: Date values and the server's name in Server and error pages. */
export function maskResponse(text: string): string {
  return maskServerName(text).replace(/^Date: .*$/gm, 'Date: X');
}

/** The access-log lines (`ADDRESS rest`) of one server, by client address. */
export function accessByAddress(srv: RunningServer): Map<string, string[]> {
  const byAddress = new Map<string, string[]>();
  let text = '';
  try {
    text = fs.readFileSync(srv.path('access.log'), 'latin1');
  } catch { /* nothing logged */ }
  for (const line of text.split('\n')) {
    const m = /^(\S+) (.*)$/.exec(line);
    if (!m) continue;
    const list = byAddress.get(m[1]) ?? [];
    list.push(m[2]);
    byAddress.set(m[1], list);
  }
  return byAddress;
}

/** Runs `fn` over `items` with at most `limit` at a time, results in order. */
export async function bounded<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}

/** Outcome of one case on one server, once every case ran (the access log is read then). */
export function outcome(c: CorpusCase, srv: RunningServer, ex: ClientExchange, origin: RecordingOrigin, access: Map<string, string[]>): Outcome {
  // `$status $body_bytes_sent`: a page of the server's own counted as masked (its name is in the Server header or the page)
  const sign = signIn(ex.data);
  return {
    response: maskResponse(ex.data),
    end: ex.end,
    upstream: origin.received.get(`${c.from} ${srv.port(8080)}`) ?? [],
    access: (access.get(c.from) ?? []).map((l) => l.replace(/^(\d{3}) (\d+) /, (_m, status: string, bytes: string) =>
      `${status} ${maskNameInPageLength(Number(status), Number(bytes), sign)} `)),
  };
}

/**
 * The outcome as compared: sent in several writes, whether the server had
 * read the last bytes when it closed is timing, and with it whether the
 * close is a reset (nginx itself does either), so a reset counts as a close.
 */
export function comparable(o: Outcome, c: CorpusCase): Outcome {
  return Array.isArray(c.parts) && o.end === 'reset' ? { ...o, end: 'close' } : o;
}

/**
 * A node:http2 client for tests: one session, requests as promises that
 * always resolve (a reset stream gives status 0 and the error's text).
 */
import http2 from 'node:http2';

export interface H2Response {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
  error?: string;
}

export function h2connect(port: number, scheme = 'https', servername = 'localhost'): http2.ClientHttp2Session {
  const session = http2.connect(`${scheme}://127.0.0.1:${port}`, { rejectUnauthorized: false, servername });
  session.on('error', () => undefined);
  return session;
}

export function h2request(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Buffer | string): Promise<H2Response> {
  return new Promise((resolve) => {
    const stream = session.request({ ':authority': 'localhost', ...headers }, { endStream: body === undefined });
    const chunks: Buffer[] = [];
    let head: http2.IncomingHttpHeaders = {};
    stream.on('response', (h) => { head = h; });
    stream.on('data', (d: Buffer) => chunks.push(d));
    stream.on('end', () => resolve({ status: Number(head[':status']), headers: head, body: Buffer.concat(chunks) }));
    stream.on('error', (e: Error) => resolve({ status: 0, headers: head, body: Buffer.concat(chunks), error: e.message }));
    if (body !== undefined) stream.end(body);
  });
}

/** Resolves when the server sends GOAWAY (its last stream id), or undefined when the session closes without one. */
export function h2goaway(session: http2.ClientHttp2Session): Promise<number | undefined> {
  return new Promise((resolve) => {
    session.once('goaway', (_code: number, lastStreamId: number) => resolve(lastStreamId));
    session.once('close', () => resolve(undefined));
  });
}

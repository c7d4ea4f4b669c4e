/**
 * A TLS client for tests: one connection, one raw request, everything the
 * server sent back, plus what the handshake showed (peer certificate,
 * protocol, ALPN, session for resumption, stapled OCSP response).
 */
import tls from 'node:tls';
import type { X509Certificate } from 'node:crypto';

export interface TlsExchange {
  /** Bytes received until the server closed (or the timeout). */
  data: Buffer;
  /** The handshake failed: OpenSSL's message (e.g. "... alert unrecognized name ..."). */
  error?: string;
  peer?: X509Certificate;
  protocol?: string | null;
  alpn?: string | false | null;
  reused?: boolean;
  /** The last session the server gave (for `session` of a later connection). */
  session?: Buffer;
  /** A stapled OCSP response, if any. */
  ocsp?: Buffer;
}

export type TlsClientOptions = tls.ConnectionOptions & { request?: string; timeoutMs?: number };

export function tlsExchange(port: number, opts: TlsClientOptions = {}): Promise<TlsExchange> {
  const { request = 'GET / HTTP/1.0\r\nHost: localhost\r\n\r\n', timeoutMs = 5000, ...tlsOpts } = opts;
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const out: TlsExchange = { data: Buffer.alloc(0) };
    const sock = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...tlsOpts });
    const timer = setTimeout(() => sock.destroy(), timeoutMs);
    sock.on('OCSPResponse', (r: Buffer) => { out.ocsp = r; });
    sock.on('session', (s: Buffer) => { out.session = s; });
    sock.once('secureConnect', () => {
      out.peer = sock.getPeerX509Certificate();
      out.protocol = sock.getProtocol();
      out.alpn = sock.alpnProtocol;
      out.reused = sock.isSessionReused();
      if (request) sock.write(request);
    });
    sock.on('data', (d: Buffer) => chunks.push(d));
    sock.on('error', (e: Error) => { if (!out.peer) out.error = e.message; });
    sock.on('close', () => {
      clearTimeout(timer);
      out.data = Buffer.concat(chunks);
      // sessions (TLS 1.3 tickets) may arrive after the response; 'close' comes after them
      resolve(out);
    });
  });
}

/** The body of a `HTTP/1.x 200` response in `data` (after the blank line). */
export function bodyOf(data: Buffer): string {
  const s = data.toString('latin1');
  const i = s.indexOf('\r\n\r\n');
  return i < 0 ? '' : s.slice(i + 4);
}

export function statusOf(data: Buffer): number {
  const m = /^HTTP\/\d\.\d (\d{3})/.exec(data.toString('latin1'));
  return m ? Number(m[1]) : 0;
}

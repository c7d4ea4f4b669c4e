/**
 * One HTTP exchange a plugin makes of its own (lua-resty-http's
 * request_uri as APISIX's plugins use it): forward-auth's call to the auth
 * service, proxy-mirror's copy of the request, the HTTP loggers' batches.
 * http or https (`sslVerify` decides whether the certificate must verify; a
 * name is sent as SNI, an address is not, RFC 6066), `timeoutMs` for each
 * wait as lua-resty-http's set_timeout, a connection of its own unless the
 * caller keeps a pool (`agent`). Resolves with the answer whatever its
 * status; rejects when the exchange fails, saying whether it failed before
 * the answer began or while it was read.
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

export interface HttpCall {
  method: string;
  headers: http.OutgoingHttpHeaders;
  body?: string | Buffer;
  timeoutMs: number;
  sslVerify: boolean;
  /** A keepalive pool; none: a connection for this exchange only. */
  agent?: http.Agent;
  /** The answer's body is read and dropped (proxy-mirror does not look at it). */
  discardBody?: boolean;
}

export interface HttpAnswer {
  status: number;
  headers: Record<string, string[]>;
  body: Buffer;
}

/** Why an exchange failed: `request` before the answer's head, `response` while its body was read. */
export class HttpCallError extends Error {
  readonly during: 'request' | 'response';

  constructor(during: 'request' | 'response', message: string) {
    super(message);
    this.during = during;
  }
}

/** The address of a URL: its host without IPv6 brackets, and the port (the scheme's default if none). */
export function serverOf(uri: string | URL): { host: string; port: number; secure: boolean } {
  const url = typeof uri === 'string' ? new URL(uri) : uri;
  const secure = url.protocol === 'https:';
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port === '' ? (secure ? 443 : 80) : Number(url.port), secure };
}

export function httpCall(uri: string | URL, c: HttpCall): Promise<HttpAnswer> {
  const url = typeof uri === 'string' ? new URL(uri) : uri;
  const { host, port, secure } = serverOf(url);
  const options: https.RequestOptions = {
    host, port, method: c.method, path: `${url.pathname || '/'}${url.search}`, headers: c.headers,
    agent: c.agent ?? false, timeout: c.timeoutMs,
    ...(secure ? { servername: net.isIP(host) ? '' : host, rejectUnauthorized: c.sslVerify } : {}),
  };
  return new Promise((resolve, reject) => {
    let req: http.ClientRequest;
    try {
      req = (secure ? https : http).request(options, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (b: Buffer) => { if (!c.discardBody) chunks.push(b); });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headersDistinct as Record<string, string[]>, body: Buffer.concat(chunks) }));
        res.on('error', (e) => reject(new HttpCallError('response', e.message)));
      });
    } catch (e) {
      // a path or header Node will not send
      reject(new HttpCallError('request', (e as Error).message));
      return;
    }
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => reject(new HttpCallError('request', e.message)));
    req.end(c.body);
  });
}

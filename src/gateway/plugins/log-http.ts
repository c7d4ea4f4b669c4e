/**
 * The HTTP exchange the HTTP-based loggers share (lua-resty-http's
 * request / request_uri as they use it): one request on a connection of its
 * own, http or https (`sslVerify` decides whether the certificate must
 * verify), bounded by `timeoutMs` as a whole. Resolves with the status and
 * body whatever the status (each logger judges it); rejects when the
 * exchange itself fails.
 */
import http from 'node:http';
import https from 'node:https';

export interface LogRequest {
  method: 'GET' | 'POST';
  headers: Record<string, string | number>;
  body?: string;
  timeoutMs: number;
  sslVerify: boolean;
}

export interface LogReply { status: number; body: string }

/** `host[..] port[..]` of a URL, as the loggers' error lines name the server. */
export function serverOf(uri: string): { host: string; port: number; secure: boolean } {
  const url = new URL(uri);
  const secure = url.protocol === 'https:';
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port === '' ? (secure ? 443 : 80) : Number(url.port), secure };
}

export function logRequest(uri: string, r: LogRequest): Promise<LogReply> {
  const url = new URL(uri);
  const { host, port, secure } = serverOf(uri);
  const body = r.body ?? '';
  const options: https.RequestOptions = {
    host, port, method: r.method, path: `${url.pathname || '/'}${url.search}`, agent: false,
    headers: { ...r.headers, ...(r.method === 'POST' ? { 'Content-Length': Buffer.byteLength(body) } : {}) },
    ...(secure ? { servername: host, rejectUnauthorized: r.sslVerify } : {}),
  };
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request(options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() });
      });
      res.on('error', (e) => reject(new Error(`error while sending data to [${host}] port[${port}] ${e.message}`)));
    });
    const timer = setTimeout(() => req.destroy(new Error('timeout')), r.timeoutMs);
    req.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`failed to connect to host[${host}] port[${port}] ${e.message}`));
    });
    req.end(r.method === 'POST' ? body : undefined);
  });
}

/** http-logger's and clickhouse-logger's verdict: a status of 400 or more fails the batch. */
export async function postOrFail(uri: string, r: LogRequest): Promise<void> {
  const reply = await logRequest(uri, r);
  if (reply.status >= 400) {
    const { host, port } = serverOf(uri);
    throw new Error(`server returned status code[${reply.status}] host[${host}] port[${port}] body[${reply.body}]`);
  }
}

/** One of the conf's endpoints, at random (math.random(#endpoint_addrs)). */
export function pickEndpoint(conf: { endpoint_addr?: string; endpoint_addrs?: string[] }): string {
  if (conf.endpoint_addr !== undefined) return conf.endpoint_addr;
  const all = conf.endpoint_addrs!;
  return all[Math.floor(Math.random() * all.length)];
}

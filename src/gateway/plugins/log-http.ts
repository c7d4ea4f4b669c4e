/**
 * The HTTP exchange the HTTP-based loggers share: a POST or GET of a batch
 * (httpCall), resolved with the status and body whatever the status (each
 * logger judges it), rejected with the loggers' wording when the exchange
 * itself fails.
 */
import { HttpCallError, httpCall, serverOf } from './http-call.ts';


export interface LogRequest {
  method: 'GET' | 'POST';
  headers: Record<string, string | number>;
  body?: string;
  timeoutMs: number;
  sslVerify: boolean;
}

export interface LogReply { status: number; body: string }

export async function logRequest(uri: string, r: LogRequest): Promise<LogReply> {
  const { host, port } = serverOf(uri);
  const body = r.body ?? '';
  const post = r.method === 'POST';
  try {
    const answer = await httpCall(uri, {
      method: r.method, headers: { ...r.headers, ...(post ? { 'Content-Length': Buffer.byteLength(body) } : {}) },
      body: post ? body : undefined, timeoutMs: r.timeoutMs, sslVerify: r.sslVerify,
    });
    return { status: answer.status, body: answer.body.toString() };
  } catch (e) {
    const during = e instanceof HttpCallError ? e.during : 'request';
    const msg = (e as Error).message;
    throw new Error(during === 'request' ? `failed to connect to host[${host}] port[${port}] ${msg}` : `error while sending data to [${host}] port[${port}] ${msg}`);
  }
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

/**
 * HTTP/2 connections (ALPN `h2` on TLS listeners): a node:http2 session on
 * the TLS socket, whose streams become requests of the same pipeline as
 * HTTP/1.x. node:http2's compatibility objects (Http2ServerRequest,
 * Http2ServerResponse) stand in for IncomingMessage/ServerResponse with
 * two adjustments made here: `:authority` becomes `Host` (nginx treats it
 * so) and pseudo-headers leave the header list, and the response head drops
 * the connection-specific headers HTTP/2 forbids (nginx's HTTP/2 filter
 * never sends them either).
 */
import http2 from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { HttpAddressServer, HttpConnection } from './connection.ts';
import type { AddressConf, ServerConf } from './http-conf.ts';
import { coreLoc, CORE_LOC_DEFAULTS } from './modules/core/settings.ts';
import { http2Srv, HTTP2_DEFAULTS } from './modules/http2.ts';

/** Whether ALPN offers `h2` for a handshake that selected `server` on `addr`. */
export function wantsHttp2(addr: AddressConf, server: ServerConf): boolean {
  return addr.http2 || server.level.get(http2Srv).enable === true;
}

const CONNECTION_HEADERS = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/** Makes an HTTP/2 request look like what the pipeline reads from node:http. */
function adaptRequest(req: http2.Http2ServerRequest): void {
  const headers = req.headers;
  const raw = req.rawHeaders;
  const authority = headers[':authority'];
  let out = 0;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].startsWith(':')) continue;
    raw[out++] = raw[i];
    raw[out++] = raw[i + 1];
  }
  raw.length = out;
  if (headers.host === undefined && typeof authority === 'string') {
    headers.host = authority;
    raw.unshift('Host', authority);
  }
}

/** writeHead(status, reason, rawHeaders) as the pipeline calls it, minus what HTTP/2 cannot carry. */
function adaptResponse(res: http2.Http2ServerResponse): void {
  const writeHead = res.writeHead;
  (res as unknown as { writeHead: unknown }).writeHead = function (status: number, reason?: unknown, headers?: unknown) {
    const list = Array.isArray(reason) ? reason : headers;
    const kept: string[] = [];
    if (Array.isArray(list)) {
      for (let i = 0; i < list.length; i += 2) {
        const name = String(list[i]).toLowerCase();
        if (CONNECTION_HEADERS.has(name) || (name === 'te' && String(list[i + 1]).toLowerCase() !== 'trailers')) continue;
        kept.push(name, String(list[i + 1]));
      }
    }
    return (writeHead as (s: number, h: unknown) => http2.Http2ServerResponse).call(res, status, kept);
  };
}

/** Serves HTTP/2 on a TLS socket that negotiated `h2`, or a plain one that sent the HTTP/2 preface (h2c). */
export function serveHttp2(server: HttpAddressServer, conn: HttpConnection, socket: Socket, named: ServerConf): void {
  conn.socket = socket;
  // a server-side TLS socket keeps `secureConnecting` set (only clients get 'secureConnect'),
  // which would make node:http2 wait for that event forever before reading
  (socket as TLSSocket & { secureConnecting: boolean }).secureConnecting = false;
  const h2 = named.level.get(http2Srv);
  const session = http2.performServerHandshake(socket, {
    settings: {
      maxConcurrentStreams: h2.maxConcurrentStreams ?? HTTP2_DEFAULTS.maxConcurrentStreams,
      initialWindowSize: h2.bodyPrereadSize ?? HTTP2_DEFAULTS.bodyPrereadSize,
    },
    maxHeaderListPairs: 4096,
  });
  const idle = named.level.get(coreLoc).keepaliveTimeout ?? CORE_LOC_DEFAULTS.keepaliveTimeout;
  if (idle > 0) session.setTimeout(idle, () => session.close());
  session.on('error', () => session.destroy());
  session.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, _flags: number, rawHeaders: string[]) => {
    const req = new http2.Http2ServerRequest(stream, headers, {}, rawHeaders);
    const res = new http2.Http2ServerResponse(stream);
    adaptRequest(req);
    adaptResponse(res);
    stream.on('error', () => stream.destroy());
    server.onRequest(req as unknown as IncomingMessage, res as unknown as ServerResponse, conn);
  });
}

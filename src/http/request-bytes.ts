/**
 * Bytes of a response as nginx reports them: `$bytes_sent` (the whole
 * response on the wire: head, body, chunk framing) and `$body_bytes_sent`
 * (that minus the head). (`$request_length` is the request's own count.)
 *
 * A connection carries responses one after another, so a response's bytes
 * are the growth of the socket's write counter since the previous one
 * ended. node:http hands the socket to the next pipelined response as soon
 * as one finishes, so the end of a response is taken at its 'prefinish'
 * (all of it written to the socket, the next one not yet), recorded by a
 * header filter.
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { HttpRequest } from './request.ts';
import type { Http2Response } from './http2/stream.ts';

/** socket.bytesWritten when the socket's previous response ended. */
const previousEnd = new WeakMap<Socket, number>();
/** Bytes of a complete response on the wire. */
const sentBytes = new WeakMap<ServerResponse, number>();

function onPrefinish(this: ServerResponse): void {
  const socket = this.socket;
  if (!socket) return;
  const end = socket.bytesWritten;
  sentBytes.set(this, end - (previousEnd.get(socket) ?? 0));
  previousEnd.set(socket, end);
}

/** Header filter: counts this response's bytes when it has been written out. */
export function trackResponseBytes(r: HttpRequest): void {
  r.res.once('prefinish', onPrefinish);
}

/** The response head as node:http wrote it (a latin1 string: length is its byte count). */
function headLength(res: ServerResponse): number {
  const head = (res as unknown as { _header?: string | null })._header;
  return typeof head === 'string' ? head.length : 0;
}

/** `$bytes_sent`: the response so far, head included. */
export function bytesSent(r: HttpRequest): number {
  // an HTTP/2 stream shares its socket with others: it counts its own frames
  if (r.head.version >= 2000) return (r.res as unknown as Partial<Http2Response>).sentBytes ?? 0;
  const sent = sentBytes.get(r.res);
  if (sent !== undefined) return sent;
  // unfinished (aborted, or still being sent): what reached the socket since the previous response
  const socket = r.conn.socket;
  // an HTTP/0.9 answer has no head and goes to the socket directly: every byte since the previous response
  if (r.http09) return Math.max(0, socket.bytesWritten - (previousEnd.get(socket) ?? 0));
  if (!r.res.headersSent || r.res.socket !== socket) return 0;
  return Math.max(0, (socket.bytesWritten ?? 0) - (previousEnd.get(socket) ?? 0));
}

/** `$body_bytes_sent`: the response body so far, without the head. */
export function bodyBytesSent(r: HttpRequest): number {
  if (r.head.version >= 2000) return (r.res as unknown as Partial<Http2Response>).sentBodyBytes ?? 0;
  return Math.max(0, bytesSent(r) - headLength(r.res));
}

/**
 * The request/response pair for a request node:http does not parse: a head
 * nginx refused (answered on the socket, or only logged when the client is
 * gone) and HTTP/0.9 (answered with the body alone). Built here so such a
 * request runs through the same path as any other (error_page, logs).
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Writable } from 'node:stream';
import type { RequestHead } from './request-head.ts';

export interface UnparsedExchange {
  req: IncomingMessage;
  res: ServerResponse;
  /** HTTP/0.9: where the body goes (straight to the socket, no head). */
  out: Writable | undefined;
}

/** `respond` false: nothing is written (the request is only logged). */
export function unparsedExchange(socket: Socket, head: RequestHead, respond: boolean): UnparsedExchange {
  const req = new http.IncomingMessage(socket);
  req.method = head.method;
  req.url = head.target;
  req.httpVersion = head.version >= 1001 ? '1.1' : head.version === 1000 ? '1.0' : '0.9';
  req.httpVersionMajor = head.version >= 1000 ? 1 : 0;
  req.httpVersionMinor = head.version >= 1001 ? 1 : head.version === 1000 ? 0 : 9;
  if (head.hostHeader !== undefined) {
    // for the error log's `host: "…"`
    req.rawHeaders = ['Host', head.hostHeader];
    req.headers = { host: head.hostHeader };
  }
  req.complete = true;
  req.push(null);
  const res = new http.ServerResponse(req);
  res.shouldKeepAlive = false;
  let out: Writable | undefined;
  if (head.version === 9) {
    out = new Writable({
      write: (chunk: Buffer, _enc, cb) => { socket.write(chunk, cb); },
      final: (cb) => { cb(); res.emit('finish'); },
    });
  } else if (respond) {
    res.assignSocket(socket);
  }
  // what node:http does when a response it made finishes: let the socket go, then 'close'
  res.once('finish', () => {
    if (res.socket) res.detachSocket(socket);
    process.nextTick(() => res.emit('close'));
  });
  return { req, res, out };
}

/**
 * The request/response pair of an HTTP/1.x request, made from the head the
 * connection read (src/http/head-reader.ts): node's IncomingMessage and
 * ServerResponse, so the modules see one interface for HTTP/1.x and
 * HTTP/2. No node:http server parses anything: the connection feeds the body
 * (src/http/connection.ts) and the response head is written as nginx writes
 * it (src/http/response.ts). Also made for a head nginx refused (answered on
 * the socket, or only logged when the client is gone) and for HTTP/0.9
 * (answered with the body alone), so those run through the same path as any
 * other request (error_page, logs).
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Writable } from 'node:stream';
import type { RequestHead } from './request-head.ts';

export interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  /** HTTP/0.9: where the body goes (straight to the socket, no head). */
  out: Writable | undefined;
}

/** OutgoingMessage's flag for a write that returned false (node:http's server clears it on the socket's 'drain'). */
const kNeedDrain = Object.getOwnPropertySymbols(new http.OutgoingMessage()).find((s) => s.description === 'kNeedDrain');

interface AttachedResponse {
  finished: boolean;
  emit(event: 'drain'): void;
  [flag: symbol]: boolean;
}

/**
 * A socket's 'drain' listener (this: the socket): the response written to it
 * may go on, as node:http's server tells it (socketOnDrain).
 */
export function onSocketDrain(this: Socket): void {
  const msg = (this as unknown as { _httpMessage?: AttachedResponse | null })._httpMessage;
  if (!msg || msg.finished) return;
  if (kNeedDrain !== undefined) {
    if (!msg[kNeedDrain]) return;
    msg[kNeedDrain] = false;
  }
  msg.emit('drain');
}

/** What IncomingMessage keeps of a header list (node:http's parser calls the same). */
interface HeaderLines {
  _addHeaderLines(headers: string[], n: number): void;
}

/**
 * `respond` false: nothing is written (the request is only logged).
 * `body` true: the connection pushes the body into req and ends it.
 */
export function makeExchange(socket: Socket, head: RequestHead, respond: boolean, body = false): Exchange {
  const req = new http.IncomingMessage(socket);
  req.method = head.method;
  req.url = head.target;
  const v = head.version;
  req.httpVersion = v >= 1001 ? '1.1' : v === 1000 ? '1.0' : '0.9';
  req.httpVersionMajor = v >= 1000 ? 1 : 0;
  req.httpVersionMinor = v >= 1001 ? 1 : v === 1000 ? 0 : 9;
  if (head.error === 0 && v >= 1000) {
    (req as unknown as HeaderLines)._addHeaderLines(head.rawHeaders, head.rawHeaders.length);
  } else if (head.hostHeader !== undefined) {
    // a refused head: only Host, for the error log's `host: "…"`
    req.rawHeaders = ['Host', head.hostHeader];
    req.headers = { host: head.hostHeader };
  }
  if (!body) {
    req.complete = true;
    req.push(null);
  }
  const res = new http.ServerResponse(req);
  if (head.error !== 0 || v === 9) res.shouldKeepAlive = false;
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

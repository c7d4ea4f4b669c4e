/**
 * One HTTP/2 stream as a request of the common pipeline. node:http2's
 * compatibility objects stand in for node:http's request and response, with
 * what nginx's HTTP/2 layer does on top:
 * - the request: `:authority` becomes Host, pseudo-headers leave the list,
 *   cookie crumbs join into one `Cookie` (ngx_http_v2_construct_cookie_header),
 *   names with `_` are dropped unless underscores_in_headers; a body without
 *   Content-Length is read as nginx reads a chunked one (headers_in.chunked);
 * - the response: connection-specific headers are never sent, and the
 *   stream counts its own bytes ($bytes_sent, $body_bytes_sent: the socket
 *   is shared by every stream, so its counter says nothing about one).
 */
import http2 from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HttpAddressServer, HttpConnection } from '../connection.ts';
import type { ServerConf } from '../http-conf.ts';
import { handleRequest } from '../phases.ts';
import { RequestHead } from '../request-head.ts';
import { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { validateHost } from '../request-line.ts';
import { parseTarget, parseUri } from '../uri.ts';
import { selectServer } from '../virtual-server.ts';
import { fieldSize, FRAME_HEADER_SIZE } from './wire-size.ts';

const CONNECTION_HEADERS = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

const baseWrite = http2.Http2ServerResponse.prototype.write as (this: unknown, ...args: unknown[]) => boolean;
const baseWriteHead = http2.Http2ServerResponse.prototype.writeHead as (this: unknown, status: number, headers: string[]) => unknown;

function chunkLength(chunk: unknown, encoding: unknown): number {
  if (typeof chunk === 'string') return Buffer.byteLength(chunk, typeof encoding === 'string' ? encoding as BufferEncoding : 'utf8');
  return chunk instanceof Uint8Array ? chunk.length : 0;
}

/** The response side of a stream: writes as node:http2's, plus the counts nginx logs. */
export class Http2Response extends http2.Http2ServerResponse {
  /** Body bytes handed to the stream. */
  bodyBytes = 0;
  /** Size of the HEADERS frame (an estimate, see wire-size.ts); 0 until the head is sent. */
  headFrameBytes = 0;
  /** Body bytes the stream still held when it was reset (whole writes: node:http2 tells no finer). */
  unsentBytes = 0;
  /** The stream was reset from this side (an aborted response), not by the client. */
  resetHere = false;

  override destroy(err?: Error): this {
    this.resetHere = true;
    return super.destroy(err);
  }

  override writeHead(status: number, reason?: unknown, headers?: unknown): this {
    const list = Array.isArray(reason) ? reason : headers;
    const kept: string[] = [];
    let size = FRAME_HEADER_SIZE + fieldSize(':status', String(status));
    if (Array.isArray(list)) {
      for (let i = 0; i < list.length; i += 2) {
        const name = String(list[i]).toLowerCase();
        const value = String(list[i + 1]);
        if (CONNECTION_HEADERS.has(name) || (name === 'te' && value.toLowerCase() !== 'trailers')) continue;
        kept.push(name, value);
        size += fieldSize(name, value);
      }
    }
    this.headFrameBytes = size;
    baseWriteHead.call(this, status, kept);
    return this;
  }

  /** (end(chunk) writes its chunk through here too) */
  override write(chunk: unknown, encoding?: unknown, cb?: unknown): boolean {
    this.bodyBytes += chunkLength(chunk, encoding);
    return baseWrite.call(this, chunk, encoding, cb);
  }

  /** `$body_bytes_sent`: DATA payload sent. */
  get sentBodyBytes(): number {
    return Math.max(0, this.bodyBytes - this.unsentBytes);
  }

  /** `$bytes_sent`: every frame of the stream, 9-byte frame headers included. */
  get sentBytes(): number {
    if (this.headFrameBytes === 0) return 0;
    const body = this.sentBodyBytes;
    const frameSize = this.stream?.session?.remoteSettings.maxFrameSize ?? 16384;
    return this.headFrameBytes + body + FRAME_HEADER_SIZE * Math.ceil(body / frameSize);
  }
}

/** Per connection: the server block whose settings apply to request heads (the SNI one on TLS). */
export interface StreamContext {
  server: HttpAddressServer;
  conn: HttpConnection;
  /** underscores_in_headers of the connection's server. */
  underscores: boolean;
}

/**
 * Turns node's view of the request into what the pipeline reads from
 * node:http; returns the size of the header block as sent. Names of fields
 * dropped for their `_` go to `dropped` (nginx logs each at info level).
 */
function adaptRequest(req: http2.Http2ServerRequest, underscores: boolean, dropped: string[]): number {
  const headers = req.headers as Record<string, string | string[] | undefined>;
  const raw = req.rawHeaders;
  let size = 0;
  let out = 0;
  let cookie = -1;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    const value = raw[i + 1];
    size += fieldSize(name, value);
    if (name.charCodeAt(0) === 58 /* : */) continue;
    if (!underscores && name.includes('_')) {
      delete headers[name];
      dropped.push(`client sent invalid header: "${name}"`);
      continue;
    }
    if (name === 'cookie') {
      if (cookie >= 0) {
        raw[cookie + 1] += '; ' + value;
        continue;
      }
      cookie = out;
    }
    raw[out++] = name;
    raw[out++] = value;
  }
  raw.length = out;
  const authority = headers[':authority'];
  if (headers.host === undefined && typeof authority === 'string') {
    headers.host = authority;
    raw.unshift('host', authority);
  }
  return size;
}

/** The request head as nginx reads an HTTP/2 request: host from :authority or Host, the server by it. */
function readHead(ctx: StreamContext, req: http2.Http2ServerRequest, headerBytes: number, ended: boolean): RequestHead {
  const addr = ctx.server.addr;
  const head = new RequestHead(addr.defaultServer);
  head.method = req.method ?? 'GET';
  head.target = req.url ?? '/';
  head.version = 2000;
  head.protocol = 'HTTP/2.0';
  head.line = `${head.method} ${head.target} HTTP/2.0`;
  head.length = headerBytes;
  const ua = req.headers['user-agent'];
  head.userAgentValue = typeof ua === 'string' ? ua : undefined;
  const target = parseTarget(head.target);
  const parsed = target ? parseUri(head.target, true, ctx.server.headContext.mergeSlashes) : undefined;
  if (!target || !parsed) {
    head.error = 400;
    head.errorLog = 'client sent invalid :path header';
    return head;
  }
  head.uri = parsed.uri;
  head.args = parsed.args;
  const host = req.headers.host;
  const valid = host === undefined ? '' : validateHost(host);
  if (valid === undefined) {
    head.error = 400;
    head.errorLog = 'client sent invalid host header';
    return head;
  }
  head.host = valid;
  head.hostHeader = host;
  const m = selectServer(addr, valid);
  head.server = m.server;
  head.match = m;
  const cl = req.headers['content-length'];
  if (cl !== undefined) head.contentLength = Number(cl);
  // a body of unannounced length is read as nginx reads a chunked one (client_max_body_size as it arrives)
  else if (!ended) head.chunked = true;
  return head;
}

/**
 * The response went out while the client still sends a body nobody reads
 * (a 413, a `return`): as nginx, end the stream with RST_STREAM NO_ERROR,
 * or it would hold its flow-control window and a concurrency slot for ever.
 */
function stopBody(this: http2.ServerHttp2Stream): void {
  if (!this.closed && this.state.remoteClose !== 1) this.close(http2.constants.NGHTTP2_NO_ERROR);
}

/** Starts the request of a new stream; `onClose` runs when the stream is gone, before the request is logged. */
export function startStream(ctx: StreamContext, stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders,
  rawHeaders: string[], onClose: (r: HttpRequest) => void): HttpRequest {
  const ended = stream.readableEnded || (stream as unknown as { endAfterHeaders?: boolean }).endAfterHeaders === true;
  const req = new http2.Http2ServerRequest(stream, headers, {}, rawHeaders);
  const res = new Http2Response(stream);
  const dropped: string[] = [];
  const headerBytes = adaptRequest(req, ctx.underscores, dropped);
  const head = readHead(ctx, req, headerBytes, ended);
  if (dropped.length) head.dropped = dropped;
  const conn = ctx.conn;
  conn.requests++;
  const r = new HttpRequest(conn, ctx.server.main, head.server, req as unknown as IncomingMessage, res as unknown as ServerResponse, head);
  stream.on('error', () => stream.destroy());
  // a stream whose request side never emitted 'end' outlives its close by a tick, and node:http2
  // refuses (ENHANCE_YOUR_CALM) a new stream that finds it still counted at the concurrency limit
  if (ended) stream.resume();
  else stream.once('finish', stopBody);
  res.once('close', () => {
    // reset by either side: what the stream still held never went out
    if (stream.rstCode !== undefined && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) {
      res.unsentBytes = stream.bufferSize;
      if (!res.resetHere) requestLog(r, res.headersSent ? 'sending response to client' : undefined).info(`client canceled stream ${stream.id}`);
    } else if (res.writableEnded) {
      r.completed = true;
    }
    // nginx's HTTP/2 streams have neither r->keepalive nor r->chunked ($sent_http_connection: close)
    r.keepalive = false;
    r.chunked = false;
    onClose(r);
  });
  handleRequest(r, true);
  return r;
}

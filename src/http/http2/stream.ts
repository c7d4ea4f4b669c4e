/**
 * One HTTP/2 stream as a request of the common pipeline, with what nginx's
 * HTTP/2 layer does:
 * - the request: `:authority` becomes Host, pseudo-headers leave the list,
 *   cookie crumbs join into one `Cookie` (ngx_http_v2_construct_cookie_header),
 *   names with `_` are dropped unless underscores_in_headers; a body without
 *   Content-Length is read as nginx reads a chunked one (headers_in.chunked);
 * - the response goes to the stream's sink (src/http/http2/response.ts).
 */
import http2 from 'node:http2';
import type { AddressServer as HttpAddressServer } from '../address-server.ts';
import type { HttpConnection } from '../connection.ts';
import type { ServerConf } from '../http-conf.ts';
import { handleRequest } from '../phases.ts';
import { STAT, statAdd } from '../../core/shared.ts';
import { RequestHead } from '../request-head.ts';
import { RequestBodySource } from '../request-body-source.ts';
import { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { validateHost } from '../request-line.ts';
import { parseTarget, parseUri } from '../uri.ts';
import { selectServer } from '../virtual-server.ts';
import { Http2Sink } from './response.ts';
import { fieldSize } from './wire-size.ts';
import { http2Srv } from './module.ts';

/** Per connection: the server block whose settings apply to request heads (the SNI one on TLS). */
export interface StreamContext {
  server: HttpAddressServer;
  conn: HttpConnection;
  /** underscores_in_headers of the connection's server. */
  underscores: boolean;
  /** max_headers of the connection's server. */
  maxHeaders: number;
}

/**
 * The request's header list as nginx reads it (pseudo-headers out, cookie
 * crumbs joined, Host from :authority); returns the list and the size of
 * the header block as sent. Names of fields dropped for their `_` go to
 * `dropped` (nginx logs each at info level).
 */
function requestHeaders(raw: string[], underscores: boolean, dropped: string[]): { list: string[]; size: number; host: string | undefined; fields: number } {
  const list: string[] = [];
  let size = 0;
  let fields = 0;
  let cookie = -1;
  let host: string | undefined;
  let authority: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    const value = raw[i + 1];
    size += fieldSize(name, value);
    if (name.charCodeAt(0) === 58 /* : */) {
      if (name === ':authority') authority = value;
      continue;
    }
    fields++;
    if (!underscores && name.includes('_')) {
      dropped.push(`client sent invalid header: "${name}"`);
      continue;
    }
    if (name === 'cookie') {
      if (cookie >= 0) {
        list[cookie + 1] += '; ' + value;
        continue;
      }
      cookie = list.length;
    }
    if (name === 'host' && host === undefined) host = value;
    list.push(name, value);
  }
  if (host === undefined && authority !== undefined) {
    host = authority;
    list.unshift('host', authority);
  }
  return { list, size, host, fields };
}

/** The request head as nginx reads an HTTP/2 request: host from :authority or Host, the server by it. */
function readHead(ctx: StreamContext, headers: http2.IncomingHttpHeaders, host: string | undefined, ua: string | undefined,
  headerBytes: number, fields: number, ended: boolean): RequestHead {
  const addr = ctx.server.addr;
  const head = new RequestHead(addr.defaultServer);
  head.method = headers[':method'] ?? 'GET';
  head.target = headers[':path'] ?? '/';
  head.version = 2000;
  head.protocol = 'HTTP/2.0';
  head.line = `${head.method} ${head.target} HTTP/2.0`;
  head.length = headerBytes;
  head.userAgentValue = ua;
  // ngx_http_v2_parse_method: upper-case letters, '_' and '-'
  if (!/^[A-Z_-]+$/.test(head.method)) {
    head.error = 400;
    head.errorLog = `client sent invalid method: "${head.method}"`;
    return head;
  }
  const target = parseTarget(head.target);
  const parsed = target ? parseUri(head.target, true, ctx.server.headContext.mergeSlashes) : undefined;
  if (!target || !parsed) {
    head.error = 400;
    head.errorLog = 'client sent invalid :path header';
    return head;
  }
  head.uri = parsed.uri;
  head.args = parsed.args;
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
  // a Host naming a server block without HTTP/2 (another than the connection's, as SNI or the address chose it)
  if (m.server !== addr.defaultServer && !addr.http2 && m.server.level.get(http2Srv).enable !== true) {
    head.error = 421;
    head.errorLog = 'client attempted to request the server name for which the negotiated protocol is disabled';
    return head;
  }
  // ngx_http_v2_state_process_header counts the fields as they come, then ngx_http_process_request_header
  if (fields > ctx.maxHeaders) {
    head.error = 400;
    head.errorLog = 'client sent too many header lines';
    return head;
  }
  if (head.method === 'TRACE') {
    head.error = 405;
    head.errorLog = 'client sent TRACE method';
    return head;
  }
  const cl = headers['content-length'];
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
  const dropped: string[] = [];
  const { list, size, host, fields } = requestHeaders(rawHeaders, ctx.underscores, dropped);
  const ua = headers['user-agent'];
  const head = readHead(ctx, headers, host, typeof ua === 'string' ? ua : undefined, size, fields, ended);
  if (dropped.length) head.dropped = dropped;
  const conn = ctx.conn;
  conn.requests++;
  // (http2_chunk_size of the location the request ends up in)
  const sink = new Http2Sink(stream, head.method === 'HEAD', (): number => r.level.get(http2Srv).chunkSize);
  const body = new RequestBodySource({ pause: () => stream.pause(), resume: () => stream.resume() });
  const r: HttpRequest = new HttpRequest(conn, ctx.server.main, head.server, head, list, sink, body);
  stream.on('error', () => stream.destroy());
  stream.on('data', (chunk: Buffer) => { if (!body.push(chunk)) stream.pause(); });
  stream.once('end', () => body.end());
  stream.once('aborted', () => body.fail(499));
  // a body nobody reads is cut off once the response is out
  if (!ended) stream.once('finish', stopBody);
  stream.once('close', () => {
    // reset by either side: what the stream still held never went out
    if (stream.rstCode !== undefined && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) {
      if (!sink.resetHere) requestLog(r, sink.headersSent ? 'sending response to client' : undefined).info(`client canceled stream ${stream.id}`);
    } else if (sink.ended) {
      r.completed = true;
    }
    body.fail(499);
    // nginx's HTTP/2 streams have neither r->keepalive nor r->chunked ($sent_http_connection: close)
    r.keepalive = false;
    r.chunked = false;
    onClose(r);
    sink.streamClosed();
  });
  statAdd(STAT.REQUESTS, 1);
  handleRequest(r, true);
  return r;
}

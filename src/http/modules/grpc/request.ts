/**
 * One gRPC exchange on the upstream engine. The engine connects the socket
 * (peer choice, connect timeout, TLS, the keepalive pool, retries); the
 * HTTP/2 framing on it is node:http2's client session, made over that
 * socket on first use and kept with it, so a kept-alive connection carries
 * its session to the next request (a new stream, the next odd id). The
 * response's head and DATA are fed to the engine's ResponseReader as the
 * session delivers them (the protocol below returns the head it was given
 * and passes the body through), so intercept_errors, next_upstream on a
 * status, the relay and $upstream_* work as for proxy_pass. Trailers are
 * the client's trailers: HTTP/2 trailers, or the last chunk's for HTTP/1.1.
 */
import http2 from 'node:http2';
import type { UpstreamConnection } from '../../../upstream/connection.ts';
import { FT } from '../../upstream/conf.ts';
import type { HeaderList } from '../../upstream/module.ts';
import { upstreamRecord } from '../../upstream/module.ts';
import { BODY_AGAIN, BODY_DONE } from '../../upstream/protocol.ts';
import type { UpstreamBodyDecoder, UpstreamHead, UpstreamProtocol } from '../../upstream/protocol.ts';
import { NO_BODY } from '../../upstream/send-body.ts';
import { UpstreamRequest } from '../../upstream/upstream-request.ts';
import { copyHeaders } from '../proxy/headers-out.ts';
import type { CgiDerived } from '../cgi-upstream/conf.ts';
import type { GrpcLoc } from './conf.ts';

/** The session living on a socket (kept with it in the keepalive pool). */
const SESSIONS = new WeakMap<object, http2.ClientHttp2Session>();

/** What the reader is handed when the head arrived (the head itself is in the request). */
const HEAD_MARK = Buffer.alloc(0);
/** Handed to the body decoder when the stream ended. */
const END_MARK = Buffer.alloc(0);

/** nginx's NGX_HTTP_V2_MAX_WINDOW: the windows nginx opens to the upstream. */
const MAX_WINDOW = 2 ** 31 - 1;

function headerList(h: http2.IncomingHttpHeaders): HeaderList {
  const list: HeaderList = { names: [], lnames: [], values: [] };
  for (const [name, v] of Object.entries(h)) {
    if (name[0] === ':' || v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) {
      list.names.push(name);
      list.lnames.push(name);
      list.values.push(String(one));
    }
  }
  return list;
}

export class GrpcRequest extends UpstreamRequest<GrpcLoc, CgiDerived> {
  /** The request's HTTP/2 head (pseudo-headers first). */
  headers: http2.OutgoingHttpHeaders = {};
  authority = '';
  stream: http2.ClientHttp2Stream | undefined;
  grpcHead: UpstreamHead | undefined;
  ended = false;
  sessionOk = true;

  onConnect(conn: UpstreamConnection): void {
    if (!this.connected(conn)) return;
    this.grpcHead = undefined;
    this.ended = false;
    // the session reads the socket itself: timeouts are the stream's (below)
    conn.setTimeout(0);
    let session = SESSIONS.get(conn.socket);
    if (!session || session.closed || session.destroyed) {
      const socket = conn.socket;
      session = http2.connect(`${this.tls ? 'https' : 'http'}://${this.authority || 'localhost'}`, {
        createConnection: () => socket,
        settings: { enablePush: false, initialWindowSize: MAX_WINDOW },
      });
      session.on('error', () => { /* reported on the stream */ });
      session.setLocalWindowSize(MAX_WINDOW);
      SESSIONS.set(socket, session);
    }
    const stream = session.request(this.headers, { endStream: this.sender === NO_BODY });
    this.stream = stream;
    stream.setTimeout(this.conf.sendTimeout, () => { if (this.stream === stream) this.onTimeout(conn); });
    stream.on('response', (h) => this.onResponse(stream, h));
    stream.on('data', (chunk: Buffer) => this.onStreamData(stream, chunk));
    stream.on('trailers', (h) => this.onTrailers(stream, h));
    stream.on('end', () => this.onStreamEnd(stream));
    stream.on('error', (err: NodeJS.ErrnoException) => this.onStreamError(stream, conn, err));
    stream.on('close', () => this.onStreamClose(stream, conn));
    stream.on('drain', () => { if (this.stream === stream) this.sender.drain(); });
    if (this.sender === NO_BODY) {
      this.bodySent();
      return;
    }
    // the engine's body senders write to `socket`: here the stream, which frames DATA and keeps the window
    this.sender.start({ socket: stream } as unknown as UpstreamConnection, this);
  }

  bodySent(): void {
    const first = !this.requestBodySent;
    super.bodySent();
    this.conn?.setTimeout(0);
    const s = this.stream;
    if (!s) return;
    if (first && this.sender !== NO_BODY && !s.writableEnded) s.end();
    s.setTimeout(this.conf.readTimeout);
  }

  pauseUpstream(): void {
    this.stream?.pause();
    this.stream?.setTimeout(0);
  }

  resumeUpstream(): void {
    this.stream?.setTimeout(this.conf.readTimeout);
    this.stream?.resume();
  }

  protected closeConnection(): void {
    this.dropStream();
    super.closeConnection();
  }

  finalize(rc: number): void {
    this.dropStream();
    super.finalize(rc);
  }

  upstreamDone(keepalive: boolean): void {
    const s = this.stream;
    this.stream = undefined;
    s?.setTimeout(0);
    if (s && !s.closed) s.close(http2.constants.NGHTTP2_CANCEL);
    super.upstreamDone(keepalive && this.sessionOk);
  }

  private dropStream(): void {
    const s = this.stream;
    this.stream = undefined;
    if (s && !s.destroyed) s.close(http2.constants.NGHTTP2_CANCEL);
  }

  private onResponse(stream: http2.ClientHttp2Stream, h: http2.IncomingHttpHeaders): void {
    if (stream !== this.stream) return;
    const status = Number(h[':status']);
    this.state!.bytesReceived += 9;
    const headers = headerList(h);
    const clen = h['content-length'];
    this.grpcHead = {
      status, statusLine: '', http09: false, headers,
      contentLength: clen === undefined ? -1 : Number(clen), chunked: false, connectionClose: false, bodyStart: 0,
    };
    this.reader?.data(HEAD_MARK);
  }

  private onStreamData(stream: http2.ClientHttp2Stream, chunk: Buffer): void {
    if (stream !== this.stream) return;
    this.state!.bytesReceived += chunk.length;
    this.reader?.data(chunk);
  }

  private onTrailers(stream: http2.ClientHttp2Stream, h: http2.IncomingHttpHeaders): void {
    if (stream !== this.stream) return;
    const list = headerList(h);
    const rec = upstreamRecord(this.r);
    if (rec) rec.trailers = list;
    if (!this.settled && !this.reader?.inBody) return;
    const flat: string[] = [];
    for (let i = 0; i < list.names.length; i++) {
      if (this.d.hidden.has(list.lnames[i])) continue;
      flat.push(list.names[i], list.values[i]);
    }
    this.r.sink.setTrailers(flat);
  }

  private onStreamEnd(stream: http2.ClientHttp2Stream): void {
    if (stream !== this.stream) return;
    this.ended = true;
    if (this.grpcHead) this.reader?.data(END_MARK);
    else this.reader?.end();
  }

  private onStreamError(stream: http2.ClientHttp2Stream, conn: UpstreamConnection, err: NodeJS.ErrnoException): void {
    if (stream !== this.stream) return;
    this.sessionOk = false;
    this.failStream(conn, `upstream rejected request with error (${err.message})`);
  }

  private onStreamClose(stream: http2.ClientHttp2Stream, conn: UpstreamConnection): void {
    if (stream !== this.stream || this.ended) return;
    this.sessionOk = false;
    this.failStream(conn, stream.rstCode ? `upstream rejected request with error ${stream.rstCode}` : 'upstream prematurely closed connection');
  }

  private failStream(conn: UpstreamConnection, msg: string): void {
    if (this.reader?.inBody) {
      this.log('error', msg, 'reading upstream');
      this.reader.fail();
      return;
    }
    if (this.finished) return;
    this.log('error', msg);
    this.conn = conn;
    this.next(FT.ERROR);
  }
}

/** The protocol object: the head the session delivered, the body as the DATA came, trailers for the client. */
export const grpcProtocol: UpstreamProtocol<GrpcLoc, CgiDerived> = {
  processHeader(u) {
    return (u as GrpcRequest).grpcHead;
  },
  copyHeaders(u, head) {
    copyHeaders(u.r, head, u.d, u.conf.ignoreHeaders);
    // trailers follow the body: an HTTP/2 client's stream ends after them, an HTTP/1.1 one's body is chunked
    u.r.sink.expectTrailers?.();
    if (head.contentLength < 0) u.r.contentLength = undefined;
  },
  bodyDecoder(u): UpstreamBodyDecoder {
    const g = u as GrpcRequest;
    return {
      get keepalive() { return g.sessionOk; },
      feed(chunk, out) {
        if (chunk === END_MARK) return BODY_DONE;
        out.push(chunk);
        return BODY_AGAIN;
      },
    };
  },
};

/**
 * One client connection (nginx's ngx_connection_t + ngx_http_connection_t):
 * the read loop here, the connection's life between requests in its base
 * class (src/http/connection-lifetime.ts).
 *
 * A request head is read with nginx's grammar and limits
 * (src/http/head-reader.ts) and becomes a request with its response sink
 * (src/http/http1-response.ts); the body is framed and decoded here
 * (src/http/body-framing.ts) and pushed into the request's body source as
 * it arrives, pausing the socket while nobody takes it. No node:http server is involved:
 * an idle connection holds only its socket and this object.
 * Requests are served one at a time, as nginx does: bytes of a pipelined
 * request wait until the current one is answered. After a response the
 * connection stays open (keepalive_timeout), lingers (lingering_close) or
 * closes, as connection-lifetime.ts decides.
 * See docs/http-parsing.md.
 */
import type { Socket } from 'node:net';
import { pushCopy, readInto } from '../core/socket-read.ts';
import { LogLevel } from '../core/error-log.ts';
import type { AddressServer } from './address-server.ts';
import { BODY_INVALID, BodyFraming } from './body-framing.ts';
import { coreLoc } from './core/settings.ts';
import { handleRequest } from './phases.ts';
import { STAT, statAdd } from '../core/shared.ts';
import { HEAD_DONE, HEAD_ERROR, releaseHeadReader, takeHeadReader } from './head-reader.ts';
import type { RequestHead } from './request-head.ts';
import { HttpRequest } from './request.ts';
import { Http1Response } from './http1-response.ts';
import { RequestBodySource } from './request-body-source.ts';
import { requestLog } from './request-log.ts';
import { parseProxyProtocol, proxyHeaderComplete } from '../core/proxy-protocol.ts';
import { connectionLog, ConnectionLifetime, DETACHED, LINGER, RAW, READ_BODY, READ_HEAD, READ_PROXY, T_HEADER, T_LINGER, T_SEND, WAIT } from './connection-lifetime.ts';
import type { RawReader } from './connection-lifetime.ts';

/** Bytes of pipelined requests held before reading pauses. */
const HOLD_LIMIT = 64 * 1024;

/**
 * Where reads of plain client connections land (one worker thread reads one
 * at a time): a request head is parsed straight from it, and only bytes kept
 * past the read (a partial head, body bytes, the next pipelined request)
 * are copied out.
 */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

export class HttpConnection extends ConnectionLifetime {
  private server: AddressServer | undefined;
  /** The chunked framing broke: nothing more is read as body. */
  private broken = false;

  /** Starts reading requests from `socket` for `server`; `initial` is what was read from it already. */
  start(server: AddressServer, socket: Socket, initial?: Buffer): void {
    this.server = server;
    this.socket = socket;
    // a client may half-close after its request and still read the answer
    socket.allowHalfOpen = true;
    // reads land in READ_BUFFER, past the stream layer (plain or TLS alike); a socket handed over paused
    // (after a sniffed first read) goes on through 'data'
    let direct = false;
    if (initial === undefined && !socket.isPaused()) {
      // bytes that reached the TLS socket's stream while the handshake's last steps ran are read first
      if (socket.readableLength > 0) initial = socket.read() as Buffer | null ?? undefined;
      direct = readInto(socket, READ_BUFFER, this.onRead);
    }
    if (!direct) socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', onSocketError);
    socket.on('drain', this.onDrain);
    socket.on('close', this.onClose);
    if (this.addr.proxyProtocol) this.phase = READ_PROXY;
    this.setTimer(server.headerTimeout, T_HEADER);
    if (initial?.length) this.onData(initial);
  }

  /** Counted in stub_status's Reading: a request head is partly in. */
  private readingCounted = false;

  /** stub_status's Reading: this connection is (or no longer is) reading a request head. */
  countReading(reading: boolean): void {
    if (reading === this.readingCounted) return;
    this.readingCounted = reading;
    statAdd(STAT.READING, reading ? 1 : -1);
  }

  /** Whether bytes of a request head are in (graceful shutdown waits for such a request). */
  get reading(): boolean {
    return this.reader?.started === true || this.pending !== undefined;
  }

  /**
   * A read into READ_BUFFER. A head is parsed from the buffer itself; what
   * stays pending after it is copied. After a tunnel took the socket, its
   * 'data' listener gets a copy.
   */
  private onRead = (n: number, buf: Buffer): boolean => {
    if (this.tunnelled) return pushCopy(this.socket, n, buf);
    if (this.phase !== READ_HEAD || this.pending !== undefined) {
      this.onData(Buffer.from(buf.subarray(0, n)));
      return true;
    }
    const view = buf.subarray(0, n);
    this.pending = view;
    this.sharedPending = true;
    this.pump();
    if (this.sharedPending && this.pending !== undefined) this.pending = Buffer.from(this.pending);
    this.sharedPending = false;
    return true;
  };

  /** `pending` is (part of) READ_BUFFER: it must be copied before anything keeps it. */
  private sharedPending = false;

  protected onData = (chunk: Buffer): void => {
    if (this.phase === LINGER) {
      if (Date.now() >= this.lingerUntil) this.socket.destroy();
      else this.setTimer(this.lingerTimeout, T_LINGER);
      return;
    }
    if (this.phase === DETACHED) return;
    if (this.phase === RAW) {
      this.rawReader?.data(chunk);
      return;
    }
    this.pending = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pump();
  };

  /** Processes pending bytes as far as the current state allows. */
  protected pump(): void {
    while (this.pending !== undefined) {
      if (this.phase === READ_HEAD) {
        if (!this.readHead()) return;
      } else if (this.phase === READ_PROXY) {
        if (!this.readProxyHeader()) return;
      } else if (this.phase === READ_BODY) {
        this.readBody();
      } else {
        if (this.phase === WAIT && this.pending.length > HOLD_LIMIT) this.socket.pause();
        return;
      }
    }
  }

  private readHead(): boolean {
    const server = this.server!;
    let reader = this.reader;
    if (reader === undefined) {
      reader = this.reader = takeHeadReader(server.headContext);
      reader.head.pipelined = this.nextPipelined;
      // nginx counts a request (stub_status's requests) once its first bytes are in
      statAdd(STAT.REQUESTS, 1);
    }
    const b = this.pending!;
    if (this.deadline.kind !== T_HEADER) this.setTimer(server.headerTimeout, T_HEADER);
    const rc = reader.feed(b);
    if (rc !== HEAD_DONE && rc !== HEAD_ERROR) {
      this.countReading(true);
      return false;
    }
    this.countReading(false);
    const head = reader.head;
    this.reader = undefined;
    releaseHeadReader(reader);
    this.clearTimer();
    if (rc === HEAD_ERROR) {
      this.pending = undefined;
      this.manualRequest(head);
      return false;
    }
    this.pending = b.length > head.end ? b.subarray(head.end) : undefined;
    if (this.sharedPending) {
      // the bytes after the head outlive this read (a body, the next request)
      this.sharedPending = false;
      if (this.pending !== undefined) this.pending = Buffer.from(this.pending);
    }
    const hasBody = head.contentLength > 0 || head.chunked;
    this.framing = hasBody ? new BodyFraming(head.contentLength, head.chunked) : undefined;
    this.unreadBody = hasBody ? [] : undefined;
    this.bodyDone = !hasBody;
    this.responseDone = false;
    this.phase = hasBody ? READ_BODY : WAIT;
    if (head.version === 9) {
      this.manualRequest(head);
      return true;
    }
    this.requests++;
    const r = this.newRequest(head, hasBody);
    this.requestStarted(r);
    // body bytes already here are read before the request runs, so a bad body is its 400 as in nginx
    if (this.phase === READ_BODY && this.pending) this.readBody();
    handleRequest(r, true);
    return true;
  }

  /** The PROXY protocol header (ngx_proxy_protocol_read); a broken one closes the connection. */
  private readProxyHeader(): boolean {
    const b = this.pending!;
    if (!proxyHeaderComplete(b)) return false;
    const parsed = parseProxyProtocol(b);
    if ('error' in parsed) {
      connectionLog(this, LogLevel.error, parsed.error);
      this.pending = undefined;
      this.socket.destroy();
      return false;
    }
    this.proxyProtocol = parsed.info;
    this.pending = b.length > parsed.length ? b.subarray(parsed.length) : undefined;
    this.phase = READ_HEAD;
    return true;
  }

  private readBody(): void {
    const b = this.pending!;
    if (this.broken) {
      this.pending = undefined;
      return;
    }
    const framing = this.framing!;
    const data: Buffer[] = [];
    const end = framing.consume(b, data);
    if (end === BODY_INVALID) {
      this.pending = undefined;
      this.bodyInvalid();
      return;
    }
    this.pending = end < b.length ? b.subarray(end) : undefined;
    // a body being thrown away after the response: lingering_timeout between reads
    if (this.responseDone && this.deadline.kind === T_LINGER) this.setTimer(this.lingerTimeout, T_LINGER);
    const body = this.active?.body;
    // after the response, the rest of the body is read and dropped (ngx_http_discard_request_body)
    if (body !== undefined && !this.responseDone) {
      if (this.unreadBody !== undefined) {
        if (body.started) this.unreadBody = undefined;
        else this.unreadBody.push(b.subarray(0, end));
      }
      // a chunk's size counts against client_max_body_size before its data (nginx's chunked filter)
      const chunk = framing.pendingChunk;
      if (chunk !== undefined) body.announce(chunk);
      // the request takes what arrived; reading stops until its reader wants more (the source resumes the socket)
      for (const d of data) if (!body.push(d)) this.socket.pause();
      if (framing.done) body.end();
    }
    if (!framing.done || this.phase !== READ_BODY) return;
    this.bodyDone = true;
    this.phase = WAIT;
    if (this.responseDone && this.active) this.afterResponse(this.active);
  }

  /**
   * ngx.req.socket(true): the client's bytes go to `reader` from now on, no
   * longer read as HTTP; returns what the client sent that nobody read (a
   * body no reader took, as sent, and what followed it), or undefined when
   * `r` cannot take the connection. The response's end closes the
   * connection (lingering close).
   */
  takeRaw(r: HttpRequest, reader: RawReader): Buffer | undefined {
    if (this.active !== r || (this.phase !== WAIT && this.phase !== READ_BODY) || this.responseDone) return undefined;
    const parts = r.body.started ? [] : this.unreadBody ?? [];
    if (this.pending !== undefined) parts.push(this.pending);
    this.unreadBody = undefined;
    this.pending = undefined;
    this.framing = undefined;
    this.bodyDone = true;
    r.body.drop();
    this.keepaliveDisabled = true;
    this.phase = RAW;
    this.rawReader = reader;
    // OpenResty drops the connection's read and write timers
    this.clearTimer();
    if (this.socket.isPaused()) this.socket.resume();
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }

  /** A request starts. */
  requestStarted(r: HttpRequest): void {
    this.active = r;
    this.sentMark = this.socket.bytesWritten;
    const send = r.level.get(coreLoc).sendTimeout;
    this.setTimer(send, T_SEND);
    r.sink.onFinish(this.onFinish);
  }

  /** The request of a head just read, with its response sink and body source. */
  private newRequest(head: RequestHead, hasBody: boolean): HttpRequest {
    const socket = this.socket;
    const sink = new Http1Response(socket, head.method === 'HEAD', head.version === 9);
    const body = hasBody ? new RequestBodySource(this.bodyFlow) : RequestBodySource.empty();
    // a refused head keeps only Host, for the error log's `host: "…"`
    const headers = head.error === 0 && head.version >= 1000 ? head.rawHeaders
      : head.hostHeader !== undefined ? ['Host', head.hostHeader] : [];
    return new HttpRequest(this, this.server!.main, head.server, head, headers, sink, body);
  }

  /** The body source's reader wants more, or waits. */
  private readonly bodyFlow = {
    pause: (): void => { this.socket.pause(); },
    resume: (): void => { if (this.phase !== DETACHED && this.socket.isPaused()) this.socket.resume(); },
  };

  private onDrain = (): void => {
    (this.active?.sink as Http1Response | undefined)?.socketDrained();
  };

  /**
   * The chunked framing broke. Found before the request runs, it is nginx's
   * 400 (its handlers read or discard the body first); later a body reader
   * sees it; the connection ends.
   */
  private bodyInvalid(): void {
    const r = this.active;
    this.broken = true;
    this.keepaliveDisabled = true;
    this.bodyDone = true;
    if (this.phase === READ_BODY) this.phase = WAIT;
    if (!r) {
      this.socket.destroy();
      return;
    }
    requestLog(r).error('client sent invalid chunked body');
    if (this.responseDone) {
      this.socket.destroy();
      return;
    }
    r.bodyError = 400;
    r.body.fail(400);
  }

  /** The client went away or timed out before its head was complete: nginx logs the request with `status`. */
  protected closedWhileReading(message: string, status: number): void {
    this.countReading(false);
    const reader = this.reader!;
    this.reader = undefined;
    reader.abort(status, message, this.pending);
    const head = reader.head;
    this.phase = DETACHED;
    this.manualRequest(head, false);
    this.socket.destroy();
  }

  /**
   * An error nginx answers right after the head (`respond` false: only
   * logged), or HTTP/0.9 (no response head).
   */
  private manualRequest(head: RequestHead, respond = true): void {
    this.requests++;
    const r = this.newRequest(head, false);
    if (respond) {
      this.phase = WAIT;
      this.requestStarted(r);
    }
    handleRequest(r, respond);
    if (!respond) (r.sink as Http1Response).socketClosed();
  }
}

function onSocketError(this: Socket): void {
  this.destroy();
}

/**
 * One client connection (nginx's ngx_connection_t + ngx_http_connection_t):
 * the read loop and the connection's life between requests.
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
 * closes; client_header_timeout and send_timeout apply here.
 * See docs/http-parsing.md.
 */
import type { Socket } from 'node:net';
import { nextConnectionNumber } from '../core/shared.ts';
import { LogLevel, mainErrorLog } from '../core/error-log.ts';
import { markIdle } from '../core/graceful.ts';
import type { AddressServer } from './address-server.ts';
import { BODY_INVALID, BodyFraming } from './body-framing.ts';
import { Deadline } from './deadline.ts';
import type { AddressConf } from './http-conf.ts';
import { coreLoc, CORE_LOC_DEFAULTS } from './core/settings.ts';
import { handleRequest } from './phases.ts';
import { HEAD_DONE, HEAD_ERROR, HeadReader, releaseHeadReader, takeHeadReader } from './head-reader.ts';
import type { RequestHead } from './request-head.ts';
import { HttpRequest } from './request.ts';
import { Http1Response } from './http1-response.ts';
import { RequestBodySource } from './request-body-source.ts';
import { requestLog } from './request-log.ts';
import type { TlsConnection } from '../tls/connection-info.ts';
import { parseProxyProtocol, proxyHeaderComplete } from '../core/proxy-protocol.ts';
import type { ProxyProtocolInfo } from '../core/proxy-protocol.ts';

export { AddressServer as HttpAddressServer, setSecureAccept } from './address-server.ts';
export type { SecureAccept } from './address-server.ts';

/** Where the read loop is. */
const READ_HEAD = 0;
/** Body bytes are read into the request. */
const READ_BODY = 1;
/** A request is being answered; later bytes wait. */
const WAIT = 2;
/** Response sent, FIN sent: reading and discarding until the client closes (lingering_close). */
const LINGER = 3;
/** The socket belongs to someone else (an upgraded connection) or is closed. */
const DETACHED = 4;
/** `listen … proxy_protocol`: the PROXY header comes first. */
const READ_PROXY = 5;

const T_HEADER = 1;
const T_KEEPALIVE = 2;
const T_SEND = 3;
const T_LINGER = 4;

/** Bytes of pipelined requests held before reading pauses. */
const HOLD_LIMIT = 64 * 1024;

export class HttpConnection {
  readonly number: number;
  /** The client socket; on `listen … ssl` the TLS socket once the handshake is done (src/tls). */
  socket: Socket;
  readonly addr: AddressConf;
  /** TLS state of an `ssl` connection ($ssl_* variables); undefined for plain HTTP. */
  tls: TlsConnection | undefined;
  readonly startMs = Date.now();
  /** Requests received on this connection so far (`$connection_requests`). */
  requests = 0;
  /** The cycle is shutting down: finish the current request, then close. */
  closing = false;
  keepaliveDisabled = false;
  /** Request being processed, if any. */
  active: HttpRequest | undefined;
  /** When the connection last went idle and its bytes read then (graceful shutdown, src/core/graceful.ts). */
  idleSince = Date.now();
  idleBytes = 0;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly localAddress: string;
  readonly localPort: number;
  /** What the PROXY protocol header said ($proxy_protocol_*), on `listen … proxy_protocol`. */
  proxyProtocol: ProxyProtocolInfo | undefined;

  private server: AddressServer | undefined;
  /** The reader of the head being read; none between requests. */
  private reader: HeadReader | undefined;
  /** The next head was already here when the previous request finished ($pipe). */
  private nextPipelined = false;
  private pending: Buffer | undefined;
  private phase = READ_HEAD;
  private framing: BodyFraming | undefined;
  private bodyDone = true;
  private responseDone = true;
  private clientEnded = false;
  /** The chunked framing broke: nothing more is read as body. */
  private broken = false;
  private readonly deadline = new Deadline((kind) => this.expired(kind));
  private lingerUntil = 0;
  private lingerTimeout = 0;
  private sentMark = 0;

  constructor(socket: Socket, addr: AddressConf) {
    this.number = nextConnectionNumber();
    this.socket = socket;
    this.addr = addr;
    this.remoteAddress = stripV4Mapped(socket.remoteAddress ?? '');
    this.remotePort = socket.remotePort ?? 0;
    this.localAddress = stripV4Mapped(socket.localAddress ?? '');
    this.localPort = socket.localPort ?? 0;
    if (addr.spec.path) {
      this.remoteAddress = 'unix:';
      this.localAddress = 'unix:' + addr.spec.path;
    }
  }

  /** Starts reading requests from `socket` for `server`; `initial` is what was read from it already. */
  start(server: AddressServer, socket: Socket, initial?: Buffer): void {
    this.server = server;
    this.socket = socket;
    // a client may half-close after its request and still read the answer
    socket.allowHalfOpen = true;
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', onSocketError);
    socket.on('drain', this.onDrain);
    socket.on('close', this.onClose);
    if (this.addr.proxyProtocol) this.phase = READ_PROXY;
    this.setTimer(server.headerTimeout, T_HEADER);
    if (initial?.length) this.onData(initial);
  }

  /** Whether bytes of a request head are in (graceful shutdown waits for such a request). */
  get reading(): boolean {
    return this.reader?.started === true || this.pending !== undefined;
  }

  private onData = (chunk: Buffer): void => {
    if (this.phase === LINGER) {
      if (Date.now() >= this.lingerUntil) this.socket.destroy();
      else this.setTimer(this.lingerTimeout, T_LINGER);
      return;
    }
    if (this.phase === DETACHED) return;
    this.pending = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pump();
  };

  /** Processes pending bytes as far as the current state allows. */
  private pump(): void {
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
    }
    const b = this.pending!;
    if (this.deadline.kind !== T_HEADER) this.setTimer(server.headerTimeout, T_HEADER);
    const rc = reader.feed(b);
    if (rc !== HEAD_DONE && rc !== HEAD_ERROR) return false;
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
    const hasBody = head.contentLength > 0 || head.chunked;
    this.framing = hasBody ? new BodyFraming(head.contentLength, head.chunked) : undefined;
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

  /**
   * A 101 from the upstream turns the connection into a tunnel
   * (src/http/upstream/upgrade.ts): returns the bytes the client sent
   * after the request, and reading is the tunnel's from now on; undefined
   * when `r` cannot take the connection over.
   */
  takeForTunnel(r: HttpRequest): Buffer | undefined {
    if (this.active !== r || this.phase !== WAIT) return undefined;
    const early = this.pending ?? Buffer.alloc(0);
    this.pending = undefined;
    this.phase = DETACHED;
    this.clearTimer();
    this.socket.removeListener('data', this.onData);
    // the tunnel's 'data' listener gets what arrives from the next tick on
    if (this.socket.isPaused()) this.socket.resume();
    return early;
  }

  private onFinish = (): void => {
    if (this.active) this.responseFinished(this.active);
  };

  private responseFinished(r: HttpRequest): void {
    r.completed = true;
    // nginx clears r->keepalive before the request is logged ($sent_http_connection is "close" there)
    const keepalive = r.keepalive;
    r.keepalive = false;
    if (this.active !== r || this.phase === DETACHED) return;
    this.responseDone = true;
    this.clearTimer();
    // a client that half-closed still gets answers to the requests it sent before (nginx reads its buffer first)
    if (!keepalive || this.closing || (this.clientEnded && this.pending === undefined) || this.keepaliveDisabled) {
      this.close(r);
      return;
    }
    if (this.bodyDone) {
      this.afterResponse(r);
      return;
    }
    // the body nobody read is read and thrown away before the next request (ngx_http_discard_request_body)
    this.lingerTimeout = r.level.get(coreLoc).lingeringTimeout;
    this.setTimer(this.lingerTimeout, T_LINGER);
    if (this.socket.isPaused()) this.socket.resume();
  }

  /** The request is done and the connection stays: wait for (or read) the next one. */
  private afterResponse(r: HttpRequest): void {
    this.active = undefined;
    this.framing = undefined;
    markIdle(this, this.socket);
    if (this.closing) {
      this.close(r);
      return;
    }
    this.nextPipelined = this.pending !== undefined;
    this.phase = READ_HEAD;
    const core = r.level.get(coreLoc);
    this.setTimer(core.keepaliveTimeout, T_KEEPALIVE);
    if (this.socket.isPaused()) this.socket.resume();
    this.pump();
    // the client half-closed before: once what it sent is read, its end is seen (after the finished request is logged)
    if (this.clientEnded) setImmediate(this.endOfInput);
  }

  private endOfInput = (): void => {
    if (this.phase === READ_HEAD || (this.phase === READ_BODY && this.pending === undefined)) this.onEnd();
  };

  /** Closes after a response: with lingering_close as nginx decides, else at once. */
  private close(r: HttpRequest | undefined): void {
    if (this.phase === LINGER || this.phase === DETACHED) return;
    this.active = undefined;
    const core = r?.level.get(coreLoc);
    const mode = core?.lingeringClose ?? 'on';
    const hadBody = r !== undefined && (r.head.contentLength > 0 || r.head.chunked) && r.status !== 400;
    const linger = mode === 'always' || (mode === 'on' && (hadBody || !this.bodyDone || this.pending !== undefined
      || r?.head.error === 414 || r?.head.error === 494));
    this.pending = undefined;
    if (!linger || this.clientEnded) {
      this.phase = DETACHED;
      this.clearTimer();
      this.socket.destroySoon();
      return;
    }
    this.phase = LINGER;
    this.lingerUntil = Date.now() + (core?.lingeringTime ?? CORE_LOC_DEFAULTS.lingeringTime);
    this.lingerTimeout = core?.lingeringTimeout ?? CORE_LOC_DEFAULTS.lingeringTimeout;
    this.socket.end();
    this.setTimer(this.lingerTimeout, T_LINGER);
    if (this.socket.isPaused()) this.socket.resume();
  }

  private onEnd = (): void => {
    this.clientEnded = true;
    switch (this.phase) {
      case READ_HEAD:
      case READ_PROXY:
        if (this.reader?.started) this.closedWhileReading('client prematurely closed connection', 400);
        else this.socket.destroySoon();
        return;
      case LINGER:
      case READ_BODY:
        // the body ends early: its reader sees the request aborted (onClose); a discarded one just closes
        this.socket.destroy();
        return;
      case WAIT:
        // a request that waits (auth_delay, limit_req) ends as 499; an answer in progress is still sent
        if (this.active && !this.active.headerSent) this.active.clientClosed();
        return;
    }
  };

  private onClose = (): void => {
    this.deadline.stop();
    // a body cut short: its reader sees the request aborted (as node:http's abortIncoming)
    const r = this.active;
    if (r !== undefined && !this.bodyDone && !this.responseDone) r.body.fail(499);
    this.phase = DETACHED;
    if (r !== undefined) (r.sink as Http1Response).socketClosed();
  };

  /** The client went away or timed out before its head was complete: nginx logs the request with `status`. */
  private closedWhileReading(message: string, status: number): void {
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

  private setTimer(ms: number, kind: number): void {
    this.deadline.set(ms, kind);
  }

  private clearTimer(): void {
    this.deadline.clear();
  }

  /** A deadline passed. */
  private expired(kind: number): void {
    switch (kind) {
      case T_HEADER:
        if (this.reader?.started) {
          this.closedWhileReading('client timed out (110: Connection timed out)', 408);
        } else {
          connectionLog(this, LogLevel.info, 'client timed out (110: Connection timed out) while waiting for request');
          this.socket.destroy();
        }
        return;
      case T_SEND: {
        const r = this.active;
        if (!r || this.responseDone) return;
        const written = this.socket.bytesWritten;
        if (this.socket.writableLength > 0 && written === this.sentMark) {
          requestLog(r, 'sending to client').info('client timed out (110: Connection timed out)');
          this.socket.destroy();
          return;
        }
        this.sentMark = written;
        this.setTimer(r.level.get(coreLoc).sendTimeout, T_SEND);
        return;
      }
      default:
        // keepalive_timeout, lingering_timeout: close silently
        this.socket.destroy();
    }
  }
}

function onSocketError(this: Socket): void {
  this.destroy();
}

function stripV4Mapped(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

/** A connection-level error log line (`..., client: 127.0.0.1, server: 0.0.0.0:80`). */
function connectionLog(conn: HttpConnection, level: number, msg: string): void {
  const log = mainErrorLog();
  if (log.enabled(level)) log.log(level, `${msg}, client: ${conn.remoteAddress}, server: ${conn.addr.spec.key}`, conn.number);
}

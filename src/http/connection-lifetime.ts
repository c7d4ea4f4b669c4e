/**
 * An HTTP/1 connection's life around its requests (nginx's
 * ngx_http_finalize_connection, ngx_http_set_keepalive and
 * ngx_http_set_lingering_close, with the connection's timers): what a
 * finished response leads to (the next request, reading and dropping a body
 * nobody read, lingering close, or closing at once), client_header_timeout,
 * keepalive_timeout, send_timeout and lingering_timeout, the client's end
 * and close, and handing the socket to a tunnel. The read loop that turns
 * its bytes into requests is HttpConnection (src/http/connection.ts).
 */
import type { Socket } from 'node:net';
import { nextConnectionNumber } from '../core/shared.ts';
import { LogLevel, mainErrorLog } from '../core/error-log.ts';
import { markIdle } from '../core/graceful.ts';
import type { BodyFraming } from './body-framing.ts';
import { Deadline } from './deadline.ts';
import type { AddressConf } from './http-conf.ts';
import { coreLoc, CORE_LOC_DEFAULTS } from './core/settings.ts';
import type { HeadReader } from './head-reader.ts';
import type { HttpRequest } from './request.ts';
import type { Http1Response } from './http1-response.ts';
import { requestLog } from './request-log.ts';
import type { TlsConnection } from '../tls/connection-info.ts';
import type { ProxyProtocolInfo } from '../core/proxy-protocol.ts';

/** Where the read loop is. */
export const READ_HEAD = 0;
/** Body bytes are read into the request. */
export const READ_BODY = 1;
/** A request is being answered; later bytes wait. */
export const WAIT = 2;
/** Response sent, FIN sent: reading and discarding until the client closes (lingering_close). */
export const LINGER = 3;
/** The socket belongs to someone else (an upgraded connection) or is closed. */
export const DETACHED = 4;
/** `listen … proxy_protocol`: the PROXY header comes first. */
export const READ_PROXY = 5;
/** A raw request socket (ngx.req.socket(true)) reads the client's bytes; the response's end closes. */
export const RAW = 6;

/** Where the client's bytes go while a raw request socket has the connection. */
export interface RawReader {
  data(chunk: Buffer): void;
  /** The client ended or the connection closed. */
  end(): void;
}

export const T_HEADER = 1;
export const T_KEEPALIVE = 2;
export const T_SEND = 3;
export const T_LINGER = 4;

export abstract class ConnectionLifetime {
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

  /** The reader of the head being read; none between requests. */
  protected reader: HeadReader | undefined;
  /** The next head was already here when the previous request finished ($pipe). */
  protected nextPipelined = false;
  protected pending: Buffer | undefined;
  protected phase = READ_HEAD;
  protected framing: BodyFraming | undefined;
  protected bodyDone = true;
  protected responseDone = true;
  protected clientEnded = false;
  protected readonly deadline = new Deadline((kind) => this.expired(kind));
  protected lingerUntil = 0;
  protected lingerTimeout = 0;
  protected sentMark = 0;
  /** A tunnel reads the socket now (takeForTunnel). */
  protected tunnelled = false;
  /**
   * The body's bytes as the client sent them, while no reader took the body
   * (a raw request socket gets them as they came: chunked framing and all).
   */
  protected unreadBody: Buffer[] | undefined;
  /** The raw request socket's reader (phase RAW). */
  protected rawReader: RawReader | undefined;

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

  /** Reads what is pending as far as the state allows (the read loop). */
  protected abstract pump(): void;
  /** The read loop's 'data' listener, which a tunnel replaces. */
  protected abstract readonly onData: (chunk: Buffer) => void;
  /** The client went away or timed out before its head was complete. */
  protected abstract closedWhileReading(message: string, status: number): void;

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
    this.tunnelled = true;
    this.clearTimer();
    this.socket.removeListener('data', this.onData);
    // the tunnel's 'data' listener gets what arrives from the next tick on
    if (this.socket.isPaused()) this.socket.resume();
    return early;
  }

  protected onFinish = (): void => {
    if (this.active) this.responseFinished(this.active);
  };

  protected responseFinished(r: HttpRequest): void {
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
  protected afterResponse(r: HttpRequest): void {
    this.active = undefined;
    this.framing = undefined;
    this.unreadBody = undefined;
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
  protected close(r: HttpRequest | undefined): void {
    if (this.phase === LINGER || this.phase === DETACHED) return;
    this.active = undefined;
    const core = r?.level.get(coreLoc);
    const mode = core?.lingeringClose ?? 'on';
    const hadBody = r !== undefined && (r.head.contentLength > 0 || r.head.chunked) && r.status !== 400;
    // a raw request socket sets nginx's r->lingering_close
    const linger = mode === 'always' || (mode === 'on' && (hadBody || !this.bodyDone || this.pending !== undefined
      || r?.head.error === 414 || r?.head.error === 494 || this.phase === RAW));
    this.endRaw();
    this.pending = undefined;
    if (!linger || this.clientEnded) {
      this.phase = DETACHED;
      this.clearTimer();
      // as nginx, the request is logged before the client sees the end (the log phase runs on the next tick)
      setImmediate(() => this.socket.destroySoon());
      return;
    }
    this.phase = LINGER;
    this.lingerUntil = Date.now() + (core?.lingeringTime ?? CORE_LOC_DEFAULTS.lingeringTime);
    this.lingerTimeout = core?.lingeringTimeout ?? CORE_LOC_DEFAULTS.lingeringTimeout;
    this.socket.end();
    this.setTimer(this.lingerTimeout, T_LINGER);
    if (this.socket.isPaused()) this.socket.resume();
  }

  protected onEnd = (): void => {
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
      case RAW:
        this.rawReader?.end();
        return;
    }
  };

  /** The raw request socket no longer reads (its request ended, or the connection closed). */
  protected endRaw(): void {
    const reader = this.rawReader;
    this.rawReader = undefined;
    reader?.end();
  }

  protected onClose = (): void => {
    this.deadline.stop();
    // a body cut short: its reader sees the request aborted (as node:http's abortIncoming)
    const r = this.active;
    if (r !== undefined && !this.bodyDone && !this.responseDone) r.body.fail(499);
    this.endRaw();
    this.phase = DETACHED;
    if (r !== undefined) (r.sink as Http1Response).socketClosed();
  };

  protected setTimer(ms: number, kind: number): void {
    this.deadline.set(ms, kind);
  }

  protected clearTimer(): void {
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

function stripV4Mapped(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

/** A connection-level error log line (`..., client: 127.0.0.1, server: 0.0.0.0:80`). */
export function connectionLog(conn: ConnectionLifetime, level: number, msg: string): void {
  const log = mainErrorLog();
  if (log.enabled(level)) log.log(level, `${msg}, client: ${conn.remoteAddress}, server: ${conn.addr.spec.key}`, conn.number);
}

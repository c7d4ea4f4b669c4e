/**
 * HTTP/2 connections: ALPN `h2` on TLS listeners, and the HTTP/2 preface on
 * plain ones (`listen … http2`, or `http2 on` in the address's default
 * server). A node:http2 session runs on the socket; each stream becomes a
 * request of the common pipeline (src/http/http2/stream.ts).
 *
 * The connection's life follows nginx's HTTP/2 module: keepalive_timeout
 * runs while no stream is open, keepalive_requests and keepalive_time end
 * the connection with GOAWAY after the stream that reaches them, and a
 * graceful shutdown sends GOAWAY and lets open streams finish.
 */
import http2 from 'node:http2';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { AddressServer } from './address-server.ts';
import type { HttpConnection } from './connection.ts';
import type { AddressConf, ServerConf } from './http-conf.ts';
import { coreLoc, CORE_LOC_DEFAULTS } from './core/settings.ts';
import { http2Srv, HTTP2_DEFAULTS } from './http2/module.ts';
import type { HttpRequest } from './request.ts';
import { startStream } from './http2/stream.ts';
import { FirstSettingsShim, startsWithSettings } from './http2/first-settings.ts';
import type { StreamContext } from './http2/stream.ts';

/** Whether ALPN offers `h2` for a handshake that selected `server` on `addr`, or a plain address takes the preface. */
export function wantsHttp2(addr: AddressConf, server: ServerConf): boolean {
  return addr.http2 || server.level.get(http2Srv).enable === true;
}

/** node:http2 ends a session that holds more than this (MB); nginx has no such limit, so keep it out of the way. */
const MAX_SESSION_MEMORY_MB = 64;

/** RFC 9113 6.9.1: 2^31 - 1. */
const MAX_WINDOW = 2 ** 31 - 1;

/** The HTTP/2 sessions of connections, for a graceful shutdown. */
const sessions = new WeakMap<HttpConnection, Http2Connection>();

class Http2Connection {
  readonly session: http2.ServerHttp2Session;
  readonly conn: HttpConnection;
  readonly live = new Set<HttpRequest>();
  private readonly idleTimeout: number;
  private readonly maxRequests: number;
  private readonly maxTime: number;
  private idleTimer: NodeJS.Timeout | undefined;
  private goingAway = false;

  constructor(session: http2.ServerHttp2Session, conn: HttpConnection, named: ServerConf) {
    this.session = session;
    this.conn = conn;
    const core = named.level.get(coreLoc);
    this.idleTimeout = core.keepaliveTimeout;
    this.maxRequests = core.keepaliveRequests;
    this.maxTime = core.keepaliveTime;
    this.idle();
  }

  /** A stream opened: no idle timer while it lives; the stream that reaches a keepalive limit is the last. */
  opened(r: HttpRequest): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    this.live.add(r);
    this.conn.active = r;
    if (this.conn.requests >= this.maxRequests || Date.now() - this.conn.startMs > this.maxTime) this.goAway();
  }

  closed = (r: HttpRequest): void => {
    this.live.delete(r);
    if (this.conn.active === r) this.conn.active = this.live.values().next().value;
    if (this.live.size > 0) return;
    if (this.conn.closing || this.idleTimeout === 0) this.goAway();
    else this.idle();
  };

  private idle(): void {
    if (this.goingAway || this.idleTimeout <= 0) return;
    this.idleTimer = setTimeout(() => this.goAway(), this.idleTimeout);
  }

  /** GOAWAY: no new streams; the connection closes when the open ones are done. */
  goAway(): void {
    if (this.goingAway) return;
    this.goingAway = true;
    clearTimeout(this.idleTimer);
    if (!this.session.closed && !this.session.destroyed) this.session.close();
  }
}

/**
 * Graceful shutdown of an HTTP/2 connection: GOAWAY now, naming the last
 * stream taken (later ones are refused), and the open streams finish; false
 * when `conn` is not one.
 */
export function shutdownHttp2(conn: HttpConnection): boolean {
  const h2 = sessions.get(conn);
  if (!h2) return false;
  h2.goAway();
  return true;
}

/** Serves HTTP/2 on a TLS socket that negotiated `h2`, or a plain one that sent the HTTP/2 preface (h2c). */
export function serveHttp2(server: AddressServer, conn: HttpConnection, socket: Socket, named: ServerConf, head?: Buffer): void {
  conn.socket = socket;
  if (head === undefined) {
    // TLS: the client's first bytes tell whether it starts with SETTINGS (see first-settings.ts)
    socket.setTimeout(named.level.get(coreLoc).keepaliveTimeout, () => socket.destroy());
    socket.once('data', (chunk: Buffer) => {
      socket.setTimeout(0);
      socket.pause();
      serveHttp2(server, conn, socket, named, chunk);
    });
    return;
  }
  // a server-side TLS socket keeps `secureConnecting` set (only clients get 'secureConnect'),
  // which would make node:http2 wait for that event forever before reading
  (socket as TLSSocket & { secureConnecting: boolean }).secureConnecting = false;
  let transport: Duplex = socket;
  if (startsWithSettings(head)) socket.unshift(head);
  else transport = new FirstSettingsShim(socket, head);
  const h2 = named.level.get(http2Srv);
  const session = http2.performServerHandshake(transport, {
    settings: {
      maxConcurrentStreams: h2.maxConcurrentStreams,
      initialWindowSize: h2.bodyPrereadSize,
    },
    maxHeaderListPairs: 4096,
    maxSessionMemory: MAX_SESSION_MEMORY_MB,
  });
  // as nginx: the connection's window is the largest (a WINDOW_UPDATE right after SETTINGS); streams' stay at
  // http2_body_preread_size, so what a client may send unread is still bounded per stream
  session.setLocalWindowSize(MAX_WINDOW);
  const h2conn = new Http2Connection(session, conn, named);
  sessions.set(conn, h2conn);
  const headSettings = server.headContext.settings(named);
  const ctx: StreamContext = {
    server,
    conn,
    underscores: headSettings.underscores,
    maxHeaders: headSettings.maxHeaders,
  };
  session.on('error', () => session.destroy());
  session.on('close', () => { if (!socket.destroyed) socket.destroy(); });
  session.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, _flags: number, rawHeaders: string[]) => {
    h2conn.opened(startStream(ctx, stream, headers, rawHeaders, h2conn.closed));
  });
}

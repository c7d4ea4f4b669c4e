/**
 * The HTTP side of one listening address in a worker: a node:http server
 * (llhttp) fed with the sockets the worker accepts, per-connection state,
 * and the hand-off of each request to the phase engine.
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { nextConnectionNumber } from '../core/shared.ts';
import type { AddressConf, HttpMainConf } from './http-conf.ts';
import { coreLoc, coreSrv, CORE_LOC_DEFAULTS, CORE_SRV_DEFAULTS } from './modules/core/settings.ts';
import { handleRequest, rejectMalformed } from './phases.ts';
import { HttpRequest } from './request.ts';
import { parseTarget } from './uri.ts';
import { selectServer } from './virtual-server.ts';
import type { TlsConnection } from '../tls/connection-info.ts';

/** On an upgrade request: the bytes that came after its head (null once a tunnel took the socket). */
export const UPGRADE_HEAD = Symbol('upgradeHead');

/** Per-connection state (nginx's ngx_connection_t plus ngx_http_connection_t). */
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
  /** Request being processed, if any (for graceful shutdown). */
  active: HttpRequest | undefined;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly localAddress: string;
  readonly localPort: number;

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
}

function stripV4Mapped(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

const connOf = new WeakMap<Socket, HttpConnection>();

/** Takes over accepted sockets of `listen … ssl` addresses (the ssl module installs it); calls server.serve() after the handshake. */
export type SecureAccept = (server: HttpAddressServer, conn: HttpConnection, socket: Socket) => void;
let secureAccept: SecureAccept | undefined;

export function setSecureAccept(fn: SecureAccept): void {
  secureAccept = fn;
}

export function connectionOf(socket: Socket): HttpConnection | undefined {
  return connOf.get(socket);
}

/** Serves HTTP/1.x on one address for one cycle. */
export class HttpAddressServer {
  readonly server: http.Server;
  readonly addr: AddressConf;
  readonly main: HttpMainConf;
  readonly connections = new Set<HttpConnection>();
  private shuttingDown = false;

  constructor(main: HttpMainConf, addr: AddressConf) {
    this.main = main;
    this.addr = addr;
    const srv = addr.defaultServer.level.get(coreSrv);
    const loc = addr.defaultServer.level.get(coreLoc);
    const large = srv.largeHeaderBuffers ?? CORE_SRV_DEFAULTS.largeHeaderBuffers;
    this.server = http.createServer({
      // llhttp's single header-size limit; nginx's per-line buffer limits are checked on top
      maxHeaderSize: Math.max(large.count * large.size, srv.clientHeaderBufferSize ?? 1024) + 1024,
      headersTimeout: srv.clientHeaderTimeout ?? CORE_SRV_DEFAULTS.clientHeaderTimeout,
      requestTimeout: 0,
      keepAliveTimeout: loc.keepaliveTimeout ?? CORE_LOC_DEFAULTS.keepaliveTimeout,
      requireHostHeader: false,
      joinDuplicateHeaders: false,
      noDelay: true,
    });
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res));
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => rejectMalformed(this, err, socket));
    this.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res));
    this.server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => this.onUpgrade(req, socket, head));
  }

  /**
   * A request asking to switch protocols (WebSocket): node:http hands over the
   * socket, so the request gets a response of its own on it; the connection
   * closes after that response unless a proxied 101 claims the socket for a
   * tunnel (src/http/modules/proxy/upgrade.ts sets UPGRADE_HEAD to null).
   */
  private onUpgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const held = req as unknown as Record<symbol, Buffer | null>;
    held[UPGRADE_HEAD] = head;
    const res = new http.ServerResponse(req);
    res.assignSocket(socket);
    res.shouldKeepAlive = false;
    res.once('finish', () => { if (held[UPGRADE_HEAD] !== null) socket.end(); });
    this.onRequest(req, res);
  }

  /** A socket the worker accepted for this address. */
  accept(socket: Socket): void {
    const conn = new HttpConnection(socket, this.addr);
    connOf.set(socket, conn);
    this.connections.add(conn);
    socket.once('close', () => this.connections.delete(conn));
    if (this.shuttingDown) conn.closing = true;
    if ((this.addr.ssl || this.addr.http2) && secureAccept) secureAccept(this, conn, socket);
    else this.server.emit('connection', socket);
  }

  /**
   * Starts HTTP/1.x on `socket` for `conn` (after a TLS handshake, or plain
   * HTTP on a TLS port); `head` is what was read from it already.
   */
  serve(conn: HttpConnection, socket: Socket, head?: Buffer): void {
    conn.socket = socket;
    connOf.set(socket, conn);
    this.server.emit('connection', socket);
    if (head?.length) socket.emit('data', head);
  }

  /** A request from llhttp, or an HTTP/2 stream (src/http/http2.ts passes its connection). */
  onRequest(req: IncomingMessage, res: ServerResponse, conn = connOf.get(req.socket)): void {
    if (!conn) { res.destroy(); return; }
    conn.requests++;
    const target = parseTarget(req.url ?? '');
    const hostHeader = req.headers.host;
    let host = (target?.host ?? hostHeader ?? '').toLowerCase();
    host = host.replace(/:\d*$/, '').replace(/\.$/, '');
    if (host.startsWith('[')) host = host.replace(/^\[(.*)\]$/, '[$1]');
    const match = selectServer(this.addr, host);
    const r = new HttpRequest(conn, this.main, match.server, req, res);
    r.host = host;
    if (match.captures) r.captures = match.captures;
    conn.active = r;
    res.once('close', () => { if (conn.active === r) conn.active = undefined; });
    void handleRequest(r, target);
  }

  /** Graceful stop: idle keepalive connections close now, busy ones after their response. */
  shutdown(): void {
    this.shuttingDown = true;
    for (const c of this.connections) {
      c.closing = true;
      if (!c.active) c.socket.destroy();
    }
  }

  /** Forced stop (worker_shutdown_timeout, TERM). */
  destroyAll(): void {
    for (const c of this.connections) c.socket.destroy();
  }
}

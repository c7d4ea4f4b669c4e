/**
 * The HTTP side of one listening address in a worker: the node:http server
 * (llhttp) its connections feed, virtual server selection for the address,
 * the settings request heads are read with, and the hand-off of each
 * request to the phase engine.
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { closeWhenIdle } from '../core/graceful.ts';
import { connectionOf, HttpConnection, setConnectionOf, UPGRADE_HEAD } from './connection.ts';
import type { AddressConf, HttpMainConf, ServerConf } from './http-conf.ts';
import { coreSrv, CORE_SRV_DEFAULTS } from './modules/core/settings.ts';
import type { HeadContext, HeadSettings } from './head-reader.ts';
import { HttpRequest } from './request.ts';
import { shutdownHttp2, wantsHttp2 } from './http2.ts';
import { requestLog } from './request-log.ts';
import { selectServer } from './virtual-server.ts';

/** Takes over accepted sockets of `listen … ssl` and `listen … http2` addresses (the ssl module installs it); calls server.serve() for HTTP/1.x. */
export type SecureAccept = (server: AddressServer, conn: HttpConnection, socket: Socket) => void;
let secureAccept: SecureAccept | undefined;

export function setSecureAccept(fn: SecureAccept): void {
  secureAccept = fn;
}

function headSettings(server: ServerConf): HeadSettings {
  const s = server.level.get(coreSrv);
  const large = s.largeHeaderBuffers ?? CORE_SRV_DEFAULTS.largeHeaderBuffers;
  return {
    largeCount: large.count,
    largeSize: large.size,
    ignoreInvalid: s.ignoreInvalidHeaders ?? CORE_SRV_DEFAULTS.ignoreInvalidHeaders,
    underscores: s.underscoresInHeaders ?? CORE_SRV_DEFAULTS.underscoresInHeaders,
    maxHeaders: s.maxHeaders ?? CORE_SRV_DEFAULTS.maxHeaders,
  };
}

/** Serves HTTP/1.x on one address for one cycle. */
export class AddressServer {
  readonly server: http.Server;
  readonly addr: AddressConf;
  readonly main: HttpMainConf;
  readonly connections = new Set<HttpConnection>();
  readonly headContext: HeadContext;
  /** client_header_timeout of the address's default server (nginx reads heads with it). */
  readonly headerTimeout: number;
  /** Connections go to the secure accept hook: TLS, or HTTP/2 with prior knowledge (`listen … http2`, `http2 on`). */
  private readonly secure: boolean;
  private shuttingDown = false;

  constructor(main: HttpMainConf, addr: AddressConf) {
    this.main = main;
    this.addr = addr;
    const def = addr.defaultServer.level.get(coreSrv);
    const settings = new Map<ServerConf, HeadSettings>();
    let largest = 0;
    for (const s of [addr.defaultServer, ...addr.servers]) {
      const hs = headSettings(s);
      settings.set(s, hs);
      largest = Math.max(largest, hs.largeCount * hs.largeSize);
    }
    const bufferSize = def.clientHeaderBufferSize ?? CORE_SRV_DEFAULTS.clientHeaderBufferSize;
    this.headContext = {
      defaultServer: addr.defaultServer,
      bufferSize,
      mergeSlashes: def.mergeSlashes ?? CORE_SRV_DEFAULTS.mergeSlashes,
      select: (host) => selectServer(addr, host),
      settings: (s) => settings.get(s) ?? headSettings(s),
    };
    this.headerTimeout = def.clientHeaderTimeout ?? CORE_SRV_DEFAULTS.clientHeaderTimeout;
    this.secure = addr.ssl || wantsHttp2(addr, addr.defaultServer);
    this.server = http.createServer({
      // heads are checked against nginx's limits before llhttp sees them; this only has to let them through
      maxHeaderSize: bufferSize + largest + 4096,
      headersTimeout: 0,
      requestTimeout: 0,
      keepAliveTimeout: 0,
      requireHostHeader: false,
      joinDuplicateHeaders: false,
    });
    this.server.maxHeadersCount = 0;
    (this.server as unknown as { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res));
    this.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res));
    this.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res));
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => this.onClientError(err, socket));
    this.server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => this.onUpgrade(req, socket, head));
  }

  /**
   * A request asking to switch protocols (WebSocket): node:http hands over the
   * socket, so the request gets a response of its own on it; the connection
   * closes after that response unless a proxied 101 claims the socket for a
   * tunnel (src/http/modules/proxy/upgrade.ts sets UPGRADE_HEAD to null).
   */
  private onUpgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    connectionOf(socket)?.detach();
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
    setConnectionOf(socket, conn);
    this.connections.add(conn);
    socket.once('close', () => this.connections.delete(conn));
    if (this.shuttingDown) conn.closing = true;
    if (this.secure && secureAccept) secureAccept(this, conn, socket);
    else conn.start(this, socket);
  }

  /**
   * Starts HTTP/1.x on `socket` for `conn` (after a TLS handshake, or plain
   * HTTP on a TLS port); `head` is what was read from it already.
   */
  serve(conn: HttpConnection, socket: Socket, head?: Buffer): void {
    setConnectionOf(socket, conn);
    conn.start(this, socket, head);
  }

  /** A request from llhttp (HTTP/2 streams start in src/http/http2/stream.ts). */
  onRequest(req: IncomingMessage, res: ServerResponse, conn = connectionOf(req.socket)): void {
    if (!conn) { res.destroy(); return; }
    const head = conn.takeHead();
    if (!head) {
      // a request llhttp found that the connection did not hand it: never serve a guess
      res.destroy();
      req.socket.destroy();
      return;
    }
    if (head.rawPatches) {
      // names and values llhttp would have refused went in as placeholders
      for (const [i, v] of head.rawPatches) req.rawHeaders[i] = v;
      (req as unknown as { headers: unknown }).headers = null;
    }
    // node:http saw a stand-in request line; the request is what nginx read
    req.method = head.method;
    req.url = head.target;
    conn.requests++;
    const r = new HttpRequest(conn, this.main, head.server, req, res, head);
    // the connection starts it once the body bytes already here went to llhttp
    conn.requestStarted(r);
  }

  /**
   * llhttp refused bytes of a body (the head was read already). Found
   * before the request runs, it is nginx's 400 (its handlers read or discard
   * the body first); later a body reader sees it; the connection ends.
   */
  private onClientError(err: NodeJS.ErrnoException, socket: Socket): void {
    const conn = connectionOf(socket);
    const r = conn?.active;
    if (!conn || !r || err.code === 'ECONNRESET' || err.code === 'HPE_INVALID_EOF_STATE') {
      socket.destroy();
      return;
    }
    conn.markBroken();
    requestLog(r).error('client sent invalid chunked body');
    r.bodyError = 400;
    const bad = Object.assign(new Error('client sent invalid chunked body'), { status: 400 });
    if (r.req.listenerCount('error') > 0) r.req.emit('error', bad);
  }

  /** Graceful stop: idle keepalive connections close now, busy ones after their response. */
  shutdown(): void {
    this.shuttingDown = true;
    for (const c of this.connections) {
      c.closing = true;
      if (shutdownHttp2(c)) continue;
      if (!c.active) closeWhenIdle(c.socket, c, () => c.active !== undefined || c.reading);
    }
  }

  /** Forced stop (worker_shutdown_timeout, TERM). */
  destroyAll(): void {
    for (const c of this.connections) c.socket.destroy();
  }
}

/**
 * The HTTP side of one listening address in a worker: its connections,
 * virtual server selection for the address, and the settings request heads
 * are read with.
 */
import type { Socket } from 'node:net';
import { closeWhenIdle } from '../core/graceful.ts';
import { STAT, statAdd } from '../core/shared.ts';
import { HttpConnection } from './connection.ts';
import type { AddressConf, HttpMainConf, ServerConf } from './http-conf.ts';
import { coreSrv, CORE_SRV_DEFAULTS } from './core/settings.ts';
import type { HeadContext, HeadSettings } from './head-reader.ts';
import { shutdownHttp2, wantsHttp2 } from './http2.ts';
import { selectServer } from './virtual-server.ts';

/** Takes over accepted sockets of `listen … ssl` and `listen … http2` addresses (the ssl module installs it); calls server.serve() for HTTP/1.x. */
export type SecureAccept = (server: AddressServer, conn: HttpConnection, socket: Socket) => void;
let secureAccept: SecureAccept | undefined;

export function setSecureAccept(fn: SecureAccept): void {
  secureAccept = fn;
}

function headSettings(server: ServerConf): HeadSettings {
  const s = server.level.get(coreSrv);
  const large = s.largeHeaderBuffers;
  return {
    largeCount: large.count,
    largeSize: large.size,
    ignoreInvalid: s.ignoreInvalidHeaders,
    underscores: s.underscoresInHeaders,
    maxHeaders: s.maxHeaders,
  };
}

/** Serves HTTP/1.x on one address for one cycle. */
export class AddressServer {
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
    for (const s of [addr.defaultServer, ...addr.servers]) settings.set(s, headSettings(s));
    const bufferSize = def.clientHeaderBufferSize;
    this.headContext = {
      defaultServer: addr.defaultServer,
      bufferSize,
      mergeSlashes: def.mergeSlashes,
      keepRaw: main.keepRawHeads,
      select: (host) => selectServer(addr, host),
      settings: (s) => settings.get(s) ?? headSettings(s),
    };
    this.headerTimeout = def.clientHeaderTimeout;
    this.secure = addr.ssl || wantsHttp2(addr, addr.defaultServer);
  }

  /** A socket the worker accepted for this address. */
  accept(socket: Socket): void {
    const conn = new HttpConnection(socket, this.addr);
    this.connections.add(conn);
    statAdd(STAT.ACTIVE, 1);
    socket.on('close', () => {
      this.connections.delete(conn);
      statAdd(STAT.ACTIVE, -1);
      conn.countReading(false);
    });
    if (this.shuttingDown) conn.closing = true;
    if (this.secure && secureAccept) secureAccept(this, conn, socket);
    else conn.start(this, socket);
  }

  /**
   * Starts HTTP/1.x on `socket` for `conn` (after a TLS handshake, or plain
   * HTTP on a TLS port); `head` is what was read from it already.
   */
  serve(conn: HttpConnection, socket: Socket, head?: Buffer): void {
    conn.start(this, socket, head);
  }

  /**
   * Graceful stop: idle keepalive connections close now, busy ones after their response.
   * A connection that has not yet sent a byte is left to bring its request (served with
   * `Connection: close`) or to time out, as nginx marks only keepalive connections idle
   * (ngx_http_set_keepalive): its client is usually about to send, and would not retry.
   */
  shutdown(): void {
    this.shuttingDown = true;
    for (const c of this.connections) {
      c.closing = true;
      if (shutdownHttp2(c)) continue;
      if (!c.active && c.requests > 0) closeWhenIdle(c.socket, c, () => c.active !== undefined || c.reading);
    }
  }

  /** Forced stop (worker_shutdown_timeout, TERM). */
  destroyAll(): void {
    for (const c of this.connections) c.socket.destroy();
  }
}

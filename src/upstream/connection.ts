/**
 * A connection to a peer (nginx's ngx_peer_connection_t): connecting with a
 * timeout, optionally over TLS, and handing socket events to whoever uses the
 * connection now. Socket listeners are attached once per connection and
 * dispatch to the current user, so a kept-alive connection serves many
 * requests without new closures.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { ChosenPeer } from './peer-chooser.ts';
import { countRead } from '../core/read-budget.ts';

/** Whoever is using a connection: a proxied request, a stream session, or the idle pool. */
export interface ConnectionUser {
  onConnect(conn: UpstreamConnection): void;
  onData(conn: UpstreamConnection, chunk: Buffer): void;
  /** The peer closed its side (FIN). */
  onEnd(conn: UpstreamConnection): void;
  onError(conn: UpstreamConnection, err: NodeJS.ErrnoException): void;
  /** No activity for the timeout set with `setTimeout`. */
  onTimeout(conn: UpstreamConnection): void;
  onDrain(conn: UpstreamConnection): void;
}

export interface ConnectOptions {
  timeoutMs: number;
  /** TLS client options; the handshake is part of connecting. */
  tls?: tls.ConnectionOptions;
  /** Bytes sent in the clear before the TLS handshake (stream's PROXY protocol header with proxy_ssl). */
  plainPrefix?: Buffer;
  noDelay?: boolean;
  /** SO_KEEPALIVE on the socket. */
  keepAlive?: boolean;
  /** The local address (and port) to connect from (proxy_bind). */
  localAddress?: string;
  localPort?: number;
}

/** node:tls passes these on to net.connect, though its types do not list them (proxy_bind). */
function bindTo(opts: ConnectOptions): tls.ConnectionOptions {
  return (opts.localAddress === undefined ? {} : { localAddress: opts.localAddress, localPort: opts.localPort }) as tls.ConnectionOptions;
}

/** Where reads of plain upstream connections land (one worker thread reads one at a time). */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

export class UpstreamConnection {
  readonly socket: net.Socket;
  readonly peer: ChosenPeer;
  user: ConnectionUser | undefined;
  /** Requests sent over this connection (keepalive_requests). */
  requests = 0;
  readonly startMs = Date.now();
  connected = false;
  /** The TCP connection is up (a TLS handshake may still be running). */
  tcpConnected = false;
  /** The peer has closed its side or the socket failed: never reuse. */
  broken = false;
  /** socket.bytesWritten / bytes read when the current user took the connection. */
  writtenAtStart = 0;
  bytesRead = 0;
  private timeoutMs = 0;

  private constructor(socket: net.Socket, peer: ChosenPeer) {
    this.socket = socket;
    this.peer = peer;
    // a plain connection reads through `onread` (handleRead) and emits no 'data'
    if (socket instanceof tls.TLSSocket) socket.on('data', this.handleData);
    socket.on('end', this.handleEnd);
    socket.on('error', this.handleError);
    socket.on('timeout', this.handleTimeout);
    socket.on('drain', this.handleDrain);
    socket.on('close', this.handleClose);
  }

  /** Opens a connection to `peer`; the user gets onConnect or onError/onTimeout. */
  static open(peer: ChosenPeer, opts: ConnectOptions, user: ConnectionUser): UpstreamConnection {
    const a = peer.addr;
    let socket: net.Socket;
    if (opts.tls && opts.plainPrefix) {
      const raw = a.path !== undefined ? net.connect({ path: a.path })
        : net.connect({ host: a.host!, port: a.port!, localAddress: opts.localAddress, localPort: opts.localPort });
      const prefix = opts.plainPrefix;
      // listening first: the prefix is written before the TLS layer starts its handshake on 'connect'
      raw.once('connect', () => raw.write(prefix));
      socket = tls.connect({ ...opts.tls, socket: raw });
      raw.once('connect', () => socket.emit('connect'));
    } else if (opts.tls) {
      socket = tls.connect(a.path !== undefined
        ? { path: a.path, ...opts.tls }
        : { host: a.host, port: a.port, ...opts.tls, ...bindTo(opts) });
    } else {
      // reads land in one buffer per worker and are copied out (see handleRead)
      const onread = { buffer: READ_BUFFER, callback: (n: number, buf: Buffer) => conn.handleRead(n, buf) };
      socket = a.path !== undefined ? net.connect({ path: a.path, onread })
        : net.connect({ host: a.host!, port: a.port!, noDelay: opts.noDelay ?? true, localAddress: opts.localAddress, localPort: opts.localPort, onread });
    }
    const conn = new UpstreamConnection(socket, peer);
    conn.user = user;
    conn.setTimeout(opts.timeoutMs);
    if (opts.keepAlive) socket.setKeepAlive(true);
    socket.once('connect', conn.handleTcpConnect);
    if (opts.tls) socket.once('secureConnect', conn.handleConnect);
    return conn;
  }

  /** Sets the inactivity timeout (0 disables it); cheap when unchanged. */
  setTimeout(ms: number): void {
    if (ms === this.timeoutMs) return;
    this.timeoutMs = ms;
    this.socket.setTimeout(ms);
  }

  /** Bytes written since the current user took the connection ($upstream_bytes_sent). */
  get sent(): number {
    return this.socket.bytesWritten - this.writtenAtStart;
  }

  /** Hands the connection to a new user (keepalive reuse). */
  adopt(user: ConnectionUser): void {
    this.user = user;
    this.writtenAtStart = this.socket.bytesWritten;
    this.bytesRead = 0;
  }

  destroy(): void {
    this.broken = true;
    this.user = undefined;
    this.socket.destroy();
  }

  private handleTcpConnect = (): void => {
    this.tcpConnected = true;
    if (!(this.socket instanceof tls.TLSSocket)) this.handleConnect();
  };

  private handleConnect = (): void => {
    this.connected = true;
    this.user?.onConnect(this);
  };

  private handleData = (chunk: Buffer): void => {
    this.bytesRead += chunk.length;
    countRead(chunk.length);
    if (this.user) this.user.onData(this, chunk);
  };

  /**
   * A read on a plain connection (net.Socket's `onread`): the bytes are in
   * the shared READ_BUFFER, so users get a copy they may keep, of the bytes
   * read (a small one from Node's buffer pool) instead of the 64 KiB buffer
   * node allocates per read; the stream machinery is skipped.
   */
  private handleRead(n: number, buf: Buffer): boolean {
    // allocUnsafe + copy: Buffer.from(a view) goes through fromArrayLike, which profiles showed
    // at up to 1 µs a read when its call site had seen other kinds of array
    const copy = Buffer.allocUnsafe(n);
    buf.copy(copy, 0, 0, n);
    this.handleData(copy);
    // a user that wants no more (backpressure) has paused the socket itself
    return true;
  }

  private handleEnd = (): void => {
    this.broken = true;
    if (this.user) this.user.onEnd(this);
  };

  private handleError = (err: NodeJS.ErrnoException): void => {
    this.broken = true;
    if (this.user) this.user.onError(this, err);
  };

  private handleTimeout = (): void => {
    if (this.user) this.user.onTimeout(this);
  };

  private handleDrain = (): void => {
    if (this.user) this.user.onDrain(this);
  };

  /** A close without 'end' or 'error' was our own doing: nobody needs telling. */
  private handleClose = (): void => {
    this.broken = true;
    this.user = undefined;
  };
}

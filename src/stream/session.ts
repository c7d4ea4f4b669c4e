/**
 * A stream session (nginx's ngx_stream_session_t): one accepted client
 * connection, the server configuration it belongs to, its variables, byte
 * counts and status, and nginx's error log context
 * (` while <action>, client: A, server: B` plus what the proxy adds).
 */
import type { Socket } from 'node:net';
import type { Level } from '../conf/context.ts';
import { sysErrorText } from '../conf/errors.ts';
import { LogLevel } from '../core/error-log.ts';
import type { ErrorLog } from '../core/error-log.ts';
import { nextConnectionNumber } from '../core/shared.ts';
import type { VariableHost, VarValue } from '../core/variables.ts';
import type { StreamAddress, StreamListen, StreamMainConf, StreamServerConf } from './conf.ts';
import type { ProxyProtocolInfo } from '../core/proxy-protocol.ts';
import type { TlsConnection } from '../tls/connection-info.ts';

/** One try of one upstream peer (ngx_stream_upstream_state_t); times in ms, -1 when not reached. */
export interface UpstreamTry {
  /** `$upstream_addr` text. */
  peer: string;
  connectTime: number;
  firstByteTime: number;
  /** `$upstream_session_time`. */
  sessionTime: number;
  bytesSent: number;
  bytesReceived: number;
}

/** A try of peer `peer` (its `$upstream_addr` text), nothing measured yet. */
export function newTry(peer: string): UpstreamTry {
  return { peer, connectTime: -1, firstByteTime: -1, sessionTime: -1, bytesSent: 0, bytesReceived: 0 };
}

function stripV4Mapped(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

export class StreamSession implements VariableHost {
  readonly number: number;
  /** The client's socket; a module that terminates TLS before content replaces it with the TLS socket. */
  socket: Socket;
  readonly main: StreamMainConf;
  /** The server serving the session: the address's default one until a name chooses another (virtual-server.ts). */
  server: StreamServerConf;
  readonly address: StreamAddress;
  readonly listen: StreamListen;
  /** The server's configuration level (stream has no locations). */
  level: Level;
  readonly log: ErrorLog;
  varCache: VarValue[] = [];
  captures: string[] | undefined;
  /** Wall clock and monotonic start, for `$session_time`. */
  readonly startMs = Date.now();
  readonly startHr = performance.now();
  /** `$status`: 0 until the session is finalized. */
  status = 0;
  /** Bytes read from the client (`$bytes_received`). */
  received = 0;
  /** nginx's log action: ` while <action>` in error lines. */
  action: string | undefined = 'initializing session';
  /** More error log context from the content handler (the proxy's upstream and byte counts). */
  logContext: (() => string) | undefined;
  /** What the PROXY protocol header said (`listen … proxy_protocol`). */
  proxyProtocol: ProxyProtocolInfo | undefined;
  /** The preread phase read client bytes (and put them back): nginx's c->buffer. */
  prereadData = false;
  /** The TLS the ssl module terminated (`listen … ssl`), once the handshake is done. */
  tls: TlsConnection | undefined;
  /** The SNI of a handshake still running (`$ssl_server_name` in `ssl_certificate`). */
  handshakeServerName: string | undefined;
  /** Upstream tries (`$upstream_*`), when the session was proxied. */
  upstreamStates: UpstreamTry[] | undefined;
  /**
   * Ends the session when the worker stops waiting for it
   * (worker_shutdown_timeout); the content handler replaces it to close its
   * own side first.
   */
  terminate: () => void = () => this.finalize(200);
  /** A client socket error, for the content handler (the default ends the session). */
  onClientError: (err: NodeJS.ErrnoException) => void;
  finalized = false;
  /** The client's address and port (the realip module may replace them with the PROXY protocol's). */
  remoteAddress: string;
  remotePort: number;
  readonly localAddress: string;
  readonly localPort: number;
  private sentAtClose = 0;
  /** What modules release when the session ends (nginx's pool cleanups), after the log phase. */
  private cleanups: Array<() => void> | undefined;
  private readonly onDone: (s: StreamSession) => void;

  constructor(main: StreamMainConf, address: StreamAddress, socket: Socket, log: ErrorLog, onDone: (s: StreamSession) => void) {
    this.number = nextConnectionNumber();
    this.main = main;
    this.address = address;
    this.server = address.defaultServer;
    const listen = address.listen;
    this.listen = listen;
    this.level = this.server.level;
    this.socket = socket;
    this.log = log;
    this.onDone = onDone;
    if (listen.spec.path !== undefined) {
      this.remoteAddress = 'unix:';
      this.remotePort = 0;
      this.localAddress = 'unix:' + listen.spec.path;
      this.localPort = 0;
    } else {
      this.remoteAddress = stripV4Mapped(socket.remoteAddress ?? '');
      this.remotePort = socket.remotePort ?? 0;
      this.localAddress = stripV4Mapped(socket.localAddress ?? '');
      this.localPort = socket.localPort ?? 0;
    }
    this.onClientError = (err) => {
      this.error(LogLevel.info, `recv() failed ${sysErrorText(err)}`);
      this.finalize(200);
    };
  }

  /** Bytes written to the client (`$bytes_sent`): what left Node's buffers. */
  get sent(): number {
    if (this.finalized) return this.sentAtClose;
    return (this.socket.bytesWritten ?? 0) - this.socket.writableLength;
  }

  /** An error log line with nginx's session context. */
  error(level: number, message: string): void {
    if (!this.log.enabled(level)) return;
    let text = message;
    if (this.action) text += ` while ${this.action}`;
    text += `, ${this.listen.udp ? 'udp ' : ''}client: ${this.remoteAddress}, server: ${this.listen.addrText}`;
    if (this.logContext) text += this.logContext();
    this.log.log(level, text, this.number);
  }

  /** A line without the context (nginx clears its log handler for these). */
  plain(level: number, message: string): void {
    if (this.log.enabled(level)) this.log.log(level, message, this.number);
  }

  /** Runs `fn` when the session ends, after its access log lines. */
  onEnd(fn: () => void): void {
    (this.cleanups ??= []).push(fn);
  }

  /** The connection now belongs to another listener (`pass`): the session ends without its log phase, the socket stays open. */
  handOver(): void {
    if (this.finalized) return;
    this.finalized = true;
    this.action = undefined;
    for (const fn of this.cleanups ?? []) fn();
    this.onDone(this);
  }

  /** Ends the session (ngx_stream_finalize_session): `$status`, the log phase, then the client socket closes. */
  finalize(status: number): void {
    if (this.finalized) return;
    this.sentAtClose = this.sent;
    this.finalized = true;
    this.status = status;
    this.action = undefined;
    for (const h of this.main.logHandlers) {
      try {
        h(this);
      } catch (e) {
        this.log.alert(`stream log handler failed: ${(e as Error).message}`);
      }
    }
    for (const fn of this.cleanups ?? []) fn();
    this.socket.destroy();
    this.onDone(this);
  }
}

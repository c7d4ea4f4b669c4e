/**
 * One proxied stream session (ngx_stream_proxy_handler and friends):
 * choosing a peer with the shared round robin, connecting with
 * proxy_connect_timeout, trying the next peer on failure as
 * proxy_next_upstream allows, then relaying bytes both ways with
 * backpressure until nginx would close: without proxy_half_close a FIN from
 * either side ends the session once what was read is written on; with it,
 * the FIN is passed on and the other direction goes on until it ends too.
 */
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { sysErrorText } from '../conf/errors.ts';
import { parseSize } from '../conf/values.ts';
import { LogLevel } from '../core/error-log.ts';
import { nextConnectionNumber } from '../core/shared.ts';
import { addressName } from '../upstream/address.ts';
import { connectFailure } from '../upstream/connect-failure.ts';
import { UpstreamConnection } from '../upstream/connection.ts';
import type { ConnectionUser } from '../upstream/connection.ts';
import type { Peer } from '../upstream/peer.ts';
import { PEER_FAILED, PEER_OK, RoundRobinPicker } from '../upstream/round-robin.ts';
import type { ComplexValue } from '../core/variables.ts';
import { Status } from './conf.ts';
import { Pump } from './pump.ts';
import { choosePeers, localAddress } from './proxy-target.ts';
import type { PeersUser, ProxyTarget } from './proxy-target.ts';
import type { LocalAddress } from './listen.ts';
import { proxyProtocolHeader } from '../core/proxy-protocol.ts';
import { newTry } from './session.ts';
import type { StreamSession, UpstreamTry } from './session.ts';
import { keepSessions, peerOptions, upstreamTls, verifyPeer } from '../tls/upstream-tls.ts';
import type { UpstreamSslConf, UpstreamTls } from '../tls/upstream-tls.ts';
import { handshakeErrorText } from '../tls/handshake-errors.ts';

/** The merged proxy settings of a server (every field set). */
export interface ProxySettings {
  connectTimeout: number;
  timeout: number;
  nextUpstream: boolean;
  nextUpstreamTries: number;
  nextUpstreamTimeout: number;
  halfClose: boolean;
  proxyProtocol: boolean;
  socketKeepalive: boolean;
  tcpNodelay: boolean;
  uploadRate: ComplexValue<StreamSession> | undefined;
  downloadRate: ComplexValue<StreamSession> | undefined;
  /** proxy_bind: a fixed address or one computed per session. */
  bind: LocalAddress | ComplexValue<StreamSession> | undefined;
  /** UDP: datagrams from the client per session, answers expected per datagram (proxy_requests, proxy_responses). */
  requests: number;
  responses: number;
  /** proxy_ssl on: TLS to the upstream with these settings. */
  tls?: UpstreamSslConf<StreamSession>;
}

export class StreamProxy implements ConnectionUser, PeersUser {
  private readonly s: StreamSession;
  private readonly client: Socket;
  private readonly conf: ProxySettings;
  private picker: RoundRobinPicker | undefined;
  /** The name nginx logs when no peer is left (the group's host). */
  private listName = '';
  private conn: UpstreamConnection | undefined;
  private state: UpstreamTry | undefined;
  private readonly tries: UpstreamTry[] = [];
  private tryStart = 0;
  private firstTry = 0;
  private connected = false;
  /** Bytes read from the upstream (nginx's u->received). */
  received = 0;
  private clientEof = false;
  private upstreamEof = false;
  private clientFlushed = false;
  private upstreamFlushed = false;
  /** Client → upstream and upstream → client, once connected. */
  private up: Pump | undefined;
  private down: Pump | undefined;
  /** When proxying started, in whole seconds (nginx's u->start_sec, for the rates). */
  private readonly startSec = Math.floor(Date.now() / 1000);
  private local: LocalAddress | undefined;
  /** proxy_ssl: this session's TLS client settings (SNI, certificate), made for its first try. */
  private tls: UpstreamTls | undefined;
  done = false;
  /** Bytes sent to the upstream when the session ended (for the log lines written after). */
  private finalSent = 0;

  constructor(s: StreamSession, conf: ProxySettings) {
    this.s = s;
    this.client = s.socket;
    this.conf = conf;
    s.upstreamStates = this.tries;
    s.logContext = this.logContext;
    s.terminate = () => this.finish(Status.OK);
    s.onClientError = this.onClientError;
  }

  /** Picks the peers for `target` and connects to the first one. */
  start(target: ProxyTarget): void {
    this.firstTry = performance.now();
    this.local = localAddress(this.s, this.conf.bind);
    choosePeers(this.s, target, this.conf.nextUpstreamTries, this);
  }

  usePicker(picker: RoundRobinPicker, name: string): void {
    this.picker = picker;
    this.listName = name;
    this.connect();
  }

  readonly fail = (status: number): void => this.finish(status);

  /** ngx_stream_proxy_connect: a new try on the next peer. */
  private connect(): void {
    const now = performance.now();
    if (this.state && this.state.sessionTime === -1) this.state.sessionTime = now - this.tryStart;
    this.s.action = 'connecting to upstream';
    this.tryStart = now;
    const peer = this.picker!.get();
    const state = newTry(peer ? peer.name : this.listName);
    this.state = state;
    this.tries.push(state);
    if (!peer) {
      this.s.error(LogLevel.error, 'no live upstreams');
      this.finish(Status.BAD_GATEWAY);
      return;
    }
    // nginx numbers upstream connections from the same counter: keep `*N` and $connection in step
    nextConnectionNumber();
    if (this.conf.tls && !this.tls) {
      this.tls = upstreamTls(this.s, this.conf.tls, this.listName, (message) => this.s.error(LogLevel.error, message));
      if (!this.tls) {
        this.finish(Status.INTERNAL_SERVER_ERROR);
        return;
      }
    }
    const conn = UpstreamConnection.open(peer, {
      timeoutMs: this.conf.connectTimeout, noDelay: this.conf.tcpNodelay, keepAlive: this.conf.socketKeepalive,
      localAddress: this.local?.address, localPort: this.local?.port,
      tls: this.tls ? peerOptions(this.tls, peer.name) : undefined,
      plainPrefix: this.tls && this.conf.proxyProtocol ? Buffer.from(proxyProtocolHeader(this.s), 'latin1') : undefined,
    }, this);
    if (this.tls) keepSessions(this.tls, peer.name, conn.socket as TLSSocket);
    // a FIN from the peer must not end our side (proxy_half_close passes it on itself)
    conn.socket.allowHalfOpen = true;
    this.conn = conn;
  }

  onConnect(conn: UpstreamConnection): void {
    if (conn !== this.conn || this.done) return;
    const s = this.s;
    if (this.tls) {
      const bad = verifyPeer(this.tls, conn.socket as TLSSocket, this.conf.tls!.verifyDepth ?? 1);
      if (bad) {
        s.action = 'SSL handshaking to upstream';
        s.error(LogLevel.error, bad);
        this.nextUpstream();
        return;
      }
    }
    const state = this.state!;
    state.connectTime = performance.now() - this.tryStart;
    // ngx_stream_upstream_notify_round_robin_peer: a peer that accepts is alive again
    // stream connects only to its groups' peers (round-robin.ts), never to a module's choice
    const peer = conn.peer as Peer;
    if (peer.accessed < peer.checked) peer.fails = 0;
    const sock = conn.socket;
    if (s.log.enabled(LogLevel.info)) {
      const local = sock.localAddress ? addressName(sock.localAddress, sock.localPort ?? 0) : 'unix:';
      s.plain(LogLevel.info, `proxy ${local} connected to ${peer.name}`);
    }
    this.connected = true;
    this.up = new Pump(this.client, sock, s, rate(this.conf.uploadRate, s), this.startSec);
    this.down = new Pump(sock, this.client, this, rate(this.conf.downloadRate, s), this.startSec);
    conn.setTimeout(this.conf.timeout);
    this.client.setTimeout(this.conf.timeout);
    if (this.conf.proxyProtocol && !this.tls) sock.write(proxyProtocolHeader(s), 'latin1');
    s.action = 'proxying connection';
    sock.once('finish', this.onUpstreamFlushed);
    const c = this.client;
    c.on('data', this.onClientData);
    c.on('end', this.onClientEnd);
    c.on('drain', this.onClientDrain);
    c.on('timeout', this.onIdle);
    c.once('finish', this.onClientFlushed);
    // paused while the PROXY protocol header was read
    c.resume();
  }

  // ---- client → upstream

  private readonly onClientData = (chunk: Buffer): void => {
    this.up!.push(chunk);
  };

  /** The upstream took what we wrote: read from the client again. */
  onDrain(): void {
    this.up?.drained();
  }

  private readonly onClientEnd = (): void => {
    this.up!.end(this.clientEnded);
  };

  private readonly clientEnded = (): void => {
    if (this.done) return;
    this.clientEof = true;
    this.conn!.socket.end();
    this.check(false);
  };

  private readonly onUpstreamFlushed = (): void => {
    this.upstreamFlushed = true;
    this.check(false);
  };

  // ---- upstream → client

  onData(conn: UpstreamConnection, chunk: Buffer): void {
    if (conn !== this.conn || this.done) return;
    if (this.state!.firstByteTime === -1) this.state!.firstByteTime = performance.now() - this.tryStart;
    this.down!.push(chunk);
  }

  private readonly onClientDrain = (): void => {
    this.down?.drained();
  };

  onEnd(conn: UpstreamConnection): void {
    if (conn !== this.conn || this.done) return;
    this.down!.end(this.upstreamEnded);
  }

  private readonly upstreamEnded = (): void => {
    if (this.done) return;
    this.upstreamEof = true;
    this.client.end();
    this.check(true);
  };

  private readonly onClientFlushed = (): void => {
    this.clientFlushed = true;
    this.check(true);
  };

  /**
   * ngx_stream_proxy_test_finalize: without half-close, one side's EOF ends
   * the session once what it sent is written on; with it, both must end.
   */
  private check(fromUpstream: boolean): void {
    if (this.done) return;
    const clientSideDone = this.clientEof && this.upstreamFlushed;
    const upstreamSideDone = this.upstreamEof && this.clientFlushed;
    if (this.conf.halfClose ? !(clientSideDone && upstreamSideDone) : !(clientSideDone || upstreamSideDone)) return;
    this.s.plain(LogLevel.info, `${fromUpstream ? 'upstream' : 'client'} disconnected${this.bytesText()}`);
    this.finish(Status.OK);
  }

  // ---- failures

  onError(conn: UpstreamConnection, err: NodeJS.ErrnoException): void {
    if (conn !== this.conn || this.done) return;
    if (!this.connected) {
      if (this.tls && conn.tcpConnected) {
        this.s.action = 'SSL handshaking to upstream';
        this.s.error(LogLevel.error, err.code?.startsWith('ERR_SSL') || /SSL routines/.test(err.message)
          ? `SSL_do_handshake() failed (SSL: ${handshakeErrorText(err)})` : `peer closed connection in SSL handshake ${sysErrorText(err)}`);
      } else {
        const { level, message } = connectFailure(err, conn.peer.name, conn.peer.addr.path !== undefined);
        this.s.error(level, message);
      }
      this.nextUpstream();
      return;
    }
    const writing = err.syscall === 'write' || err.code === 'EPIPE';
    this.s.action = writing ? 'proxying and sending to upstream' : 'proxying and reading from upstream';
    this.s.error(LogLevel.error, `${writing ? 'send()' : 'recv()'} failed ${sysErrorText(err)}`);
    this.s.action = 'proxying connection';
    // the socket is gone: what was read from it is all the client gets
    this.upstreamFlushed = true;
    this.down!.end(this.upstreamEnded);
  }

  onTimeout(conn: UpstreamConnection): void {
    if (conn !== this.conn || this.done) return;
    if (!this.connected) {
      this.s.error(LogLevel.error, 'upstream timed out (110: Connection timed out)');
      this.nextUpstream();
      return;
    }
    this.onIdle();
  }

  /** proxy_timeout passed without a read or write. */
  private readonly onIdle = (): void => {
    if (this.done) return;
    this.s.error(LogLevel.info, 'connection timed out (110: Connection timed out)');
    this.finish(Status.OK);
  };

  private readonly onClientError = (err: NodeJS.ErrnoException): void => {
    if (this.done) return;
    const writing = err.syscall === 'write' || err.code === 'EPIPE';
    if (this.connected) this.s.action = writing ? 'proxying and sending to client' : 'proxying and reading from client';
    this.s.error(LogLevel.info, `${writing ? 'send()' : 'recv()'} failed ${sysErrorText(err)}`);
    // nginx takes a failed read for the client's EOF, and says so; a failed write ends the session at once
    if (this.connected && !writing) this.s.plain(LogLevel.info, `client disconnected${this.bytesText()}`);
    this.finish(Status.OK);
  };

  /** ngx_stream_proxy_next_upstream: the try failed while connecting. */
  private nextUpstream(): void {
    const conn = this.conn!;
    const state = this.state!;
    state.bytesReceived = this.received;
    state.bytesSent = sentBytes(conn.socket);
    conn.destroy();
    this.conn = undefined;
    const picker = this.picker!;
    if (picker.free(PEER_FAILED)) this.s.error(LogLevel.warn, 'upstream server temporarily disabled');
    const timeout = this.conf.nextUpstreamTimeout;
    if (picker.tries === 0 || !this.conf.nextUpstream || (timeout && performance.now() - this.firstTry >= timeout)) {
      this.finish(Status.BAD_GATEWAY);
      return;
    }
    this.connect();
  }

  /** ngx_stream_proxy_finalize: records the try, releases the peer, closes both sides. */
  private finish(status: number): void {
    if (this.done) return;
    const state = this.state;
    const conn = this.conn;
    if (state) {
      if (state.sessionTime === -1) state.sessionTime = performance.now() - this.tryStart;
      if (conn) {
        state.bytesReceived = this.received;
        state.bytesSent = sentBytes(conn.socket);
      }
    }
    this.finalSent = conn ? sentBytes(conn.socket) : 0;
    this.done = true;
    this.up?.stop();
    this.down?.stop();
    if (this.picker?.current) this.picker.free(PEER_OK);
    conn?.destroy();
    this.s.finalize(status);
  }

  private bytesText(): string {
    const up = this.done ? this.finalSent : this.conn ? sentBytes(this.conn.socket) : 0;
    return `, bytes from/to client:${this.s.received}/${this.s.sent}, bytes from/to upstream:${this.received}/${up}`;
  }

  /** ngx_stream_proxy_log_error: what the proxy adds to the session's error lines. */
  private readonly logContext = (): string => {
    const peer = this.state?.peer;
    return (peer ? `, upstream: "${peer}"` : '') + this.bytesText();
  };
}

/** Bytes handed to the kernel on `socket` (nginx's c->sent). */
function sentBytes(socket: Socket): number {
  return (socket.bytesWritten ?? 0) - socket.writableLength;
}

/** proxy_upload_rate / proxy_download_rate for this session, bytes per second (0: no limit). */
export function rate(value: ComplexValue<StreamSession> | undefined, s: StreamSession): number {
  if (!value) return 0;
  const n = parseSize(value.constant ?? value.evaluate(s));
  return n > 0 ? n : 0;
}

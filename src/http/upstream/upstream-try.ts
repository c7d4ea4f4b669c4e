/**
 * One try's connection to the upstream, the socket side of nginx's
 * ngx_http_upstream_t: the peer the chooser gives, connecting (or reusing a
 * kept-alive connection), the socket's events, the figures of each try
 * ($upstream_addr, $upstream_*_time, …), what decides a retry, and closing
 * the try. What a try leads to (reading the response through the protocol,
 * the next try, finalizing the request) is UpstreamRequest's
 * (src/http/upstream/upstream-request.ts). Socket events reach this object
 * through the connection's single set of listeners; nothing here allocates
 * closures per event.
 */
import { performance } from 'node:perf_hooks';
import type tls from 'node:tls';
import { sysErrorText } from '../../conf/errors.ts';
import { LogLevel } from '../../core/error-log.ts';
import { connectFailure } from '../../upstream/connect-failure.ts';
import { UpstreamConnection } from '../../upstream/connection.ts';
import type { ConnectionUser } from '../../upstream/connection.ts';
import type { UpstreamGroup } from '../../upstream/group.ts';
import type { KeepalivePool } from '../../upstream/keepalive.ts';
import type { PeerChooser } from '../../upstream/peer-chooser.ts';
import { PEER_OK } from '../../upstream/round-robin.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog, UPSTREAM_CONTEXT } from '../request-log.ts';
import { newState } from './module.ts';
import { withRequestTimeouts } from './peer-choice.ts';
import type { UpstreamRecord, UpstreamState } from './module.ts';
import type { UpstreamDerived, UpstreamLoc } from './conf.ts';
import { FT } from './conf.ts';
import { unwatchClient, watchClient } from './client-watch.ts';
import type { ClientWatcher } from './client-watch.ts';
import { mayRetry, NEXT_STATUS } from './next-upstream.ts';
import type { RetryState } from './next-upstream.ts';
import type { ResponseReader } from './response-reader.ts';
import type { BodySender } from './send-body.ts';
import { localBinding } from './local-address.ts';
import type { UpstreamProtocol } from './protocol.ts';
import { keepSessions, peerOptions } from './tls.ts';
import type { UpstreamTls } from './tls.ts';
import type { Tunnel } from './upgrade.ts';

const IDLE = 0;
const CONNECTING = 1;
export const SENDING = 2;
const READING = 3;
export const DONE_STATE = 4;

const ACTIONS = ['', 'connecting to upstream', 'sending request to upstream', 'reading response header from upstream', ''];

export abstract class UpstreamTry<C extends UpstreamLoc = UpstreamLoc, D extends UpstreamDerived = UpstreamDerived>
implements ConnectionUser, ClientWatcher {
  readonly r: HttpRequest;
  /** The location's settings, with the request's own timeouts over them (a chooser may set some while choosing). */
  conf: C;
  private readonly locConf: C;
  readonly d: D;
  readonly protocol: UpstreamProtocol<C, D>;
  /** The request head (the protocol's create_request); its cache may clear conditional fields or add a revalidation's. */
  head: string;
  sender: BodySender;
  readonly group: UpstreamGroup | undefined;
  /** Asked once per try where to connect (peer-choice.ts). */
  readonly chooser: PeerChooser;
  readonly tls: UpstreamTls | undefined;
  /** `http://127.0.0.1:8081` style prefix and the URI, for log lines. */
  readonly schema: string;
  readonly uri: string;
  /** The upstream request is HEAD (proxy_cache_convert_head may make it GET). */
  isHead: boolean;
  protected readonly record: UpstreamRecord;
  protected state: UpstreamState | undefined;
  conn: UpstreamConnection | undefined;
  /** Where the try's connection came from and goes back to (the peer's pool or the group's). */
  protected pool: KeepalivePool | undefined;
  protected phase = IDLE;
  /** The chooser handed out a peer that `free` has not been told about yet. */
  protected peerHeld = false;
  /** How the last try ended (an FT bit and its status), for the chooser's next `get`; 0 before the first. */
  protected lastFailure = 0;
  protected lastStatus = 0;
  protected cached = false;
  /** nginx's u->request_sent: some of the request reached a socket. */
  requestSent = false;
  requestBodySent = false;
  protected tryStart = 0;
  protected readonly firstStart = performance.now();
  protected reader: ResponseReader | undefined;
  settled = false;
  protected finished = false;
  /** Set once the connection became a tunnel (101). */
  tunnel: Tunnel | undefined;

  constructor(r: HttpRequest, conf: C, d: D, opts: {
    protocol: UpstreamProtocol<C, D>; head: string; sender: BodySender; group: UpstreamGroup | undefined; chooser: PeerChooser;
    tls: UpstreamTls | undefined; schema: string; uri: string; record: UpstreamRecord; method: string;
    /** The protocol's create_request again, over the request as it is now (the chooser's recreateRequest). */
    recreate?: () => { head: string; sender: BodySender };
  }) {
    this.r = r;
    // a module may set this request's timeouts (the gateway's route and upstream timeouts)
    this.conf = withRequestTimeouts(r, conf);
    this.locConf = conf;
    this.d = d;
    this.protocol = opts.protocol;
    this.head = opts.head;
    this.sender = opts.sender;
    this.group = opts.group;
    this.chooser = opts.chooser;
    this.tls = opts.tls;
    this.schema = opts.schema;
    this.uri = opts.uri;
    this.record = opts.record;
    this.isHead = opts.method === 'HEAD';
    const limit = conf.nextUpstreamTries ?? 0;
    if (limit && this.chooser.tries > limit) this.chooser.tries = limit;
    this.chooser.triesLimit = limit;
    const recreate = opts.recreate;
    this.chooser.recreateRequest = recreate && (() => ({ head: this.head, sender: this.sender } = recreate()));
    if (r.sink.client) watchClient(r.sink.client, this);
  }

  /** The connection is up (or taken from the pool): the request goes out. */
  abstract onConnect(conn: UpstreamConnection): void;
  /** What a try leads to, in UpstreamRequest: the next try, the end of the relay, the client gone. */
  abstract next(ft: number): void;
  abstract relayDone(): void;
  /** Ends the exchange with a status (UpstreamRequest's). */
  abstract finalize(rc: number): void;
  abstract clientClosed(): void;

  /** Where the current try stands, for log lines (`while connecting to upstream`). */
  get action(): string {
    return ACTIONS[this.phase];
  }

  log(level: 'crit' | 'error' | 'warn' | 'info', msg: string, action = this.action): void {
    requestLog(this.r)[level](action ? `${msg} while ${action}` : msg);
  }

  private setLogUpstream(peerName: string): void {
    const sep = peerName.startsWith('unix:') ? ':' : '';
    this.r.ctx.set(UPSTREAM_CONTEXT, this.schema + peerName + sep + this.uri);
  }

  protected connect(): void {
    const now = performance.now();
    if (this.state && this.state.responseTime === -1) this.state.responseTime = now - this.tryStart;
    const state = newState(undefined);
    this.state = state;
    this.record.states.push(state);
    this.tryStart = now;
    this.phase = CONNECTING;
    this.requestSent = false;
    this.requestBodySent = false;
    this.cached = false;
    const peer = this.chooser.get(this.lastFailure, this.lastStatus);
    if (typeof peer === 'number') {
      state.peer = this.group?.name ?? '';
      this.finalize(peer);
      return;
    }
    // the chooser may have set this request's timeouts (balancer_by_lua's set_timeouts)
    this.conf = withRequestTimeouts(this.r, this.locConf);
    if (!peer) {
      state.peer = this.group?.name ?? '';
      this.setLogUpstream(state.peer);
      this.log('error', 'no live upstreams');
      this.next(FT.NOLIVE);
      return;
    }
    this.peerHeld = true;
    state.peer = peer.name;
    this.setLogUpstream(peer.name);
    // a chooser may bring the peer's own pool (the gateway's keepalive_pool)
    this.pool = peer.pool ?? this.group?.pool;
    const pooled = this.pool?.take(peer);
    if (pooled) {
      this.cached = true;
      pooled.adopt(this);
      pooled.requests++;
      this.conn = pooled;
      this.onConnect(pooled);
      return;
    }
    const conn = UpstreamConnection.open(peer, {
      timeoutMs: this.conf.connectTimeout,
      tls: this.tls ? (peer.tls ? { ...this.tls.options, ...peer.tls } : peerOptions(this.tls, peer.name)) : undefined,
      keepAlive: this.conf.socketKeepalive,
      ...(this.conf.bind ? localBinding(this.r, this.conf.bind) : undefined),
    }, this);
    if (this.tls && !peer.tls) keepSessions(this.tls, peer.name, conn.socket as tls.TLSSocket);
    conn.requests++;
    this.conn = conn;
  }

  /** BodyTarget: the whole request is on its way; now the response head is awaited. */
  bodySent(): void {
    this.requestBodySent = true;
    if (this.phase === SENDING) this.phase = READING;
    if (this.conn && this.phase === READING) this.conn.setTimeout(this.conf.readTimeout);
  }

  onDrain(): void {
    if (this.tunnel) this.tunnel.upstreamDrained();
    else this.sender.drain();
  }

  onData(conn: UpstreamConnection, chunk: Buffer): void {
    if (conn !== this.conn) return;
    this.state!.bytesReceived += chunk.length;
    if (this.tunnel) this.tunnel.fromUpstream(chunk);
    else if (this.reader) this.reader.data(chunk);
  }

  onEnd(conn: UpstreamConnection): void {
    if (conn !== this.conn) return;
    if (this.tunnel) this.tunnel.end();
    else if (this.reader) this.reader.end();
  }

  onError(conn: UpstreamConnection, err: NodeJS.ErrnoException): void {
    if (conn !== this.conn) return;
    if (this.tunnel) { this.tunnel.end(); return; }
    const phase = this.phase;
    if (phase === CONNECTING && this.tls && conn.tcpConnected && err.errno === undefined) {
      this.log('error', `SSL_do_handshake() failed (SSL: ${err.message})`, 'SSL handshaking to upstream');
      this.next(FT.ERROR);
      return;
    }
    if (this.reader?.inBody) {
      this.log('error', `recv() failed ${sysErrorText(err)}`, 'reading upstream');
      this.reader.fail();
      return;
    }
    if (phase === CONNECTING) {
      const { level, message } = connectFailure(err, conn.peer.name, conn.peer.addr.path !== undefined);
      this.log(level === LogLevel.crit ? 'crit' : 'error', message);
    } else if (phase === SENDING && err.code === 'EPIPE') {
      this.log('error', `writev() failed ${sysErrorText(err)}`);
    } else {
      this.log('error', `recv() failed ${sysErrorText(err)}`);
    }
    this.next(FT.ERROR);
  }

  onTimeout(conn: UpstreamConnection): void {
    if (conn !== this.conn || this.tunnel) return;
    if (this.reader?.inBody) {
      this.log('error', 'upstream timed out (110: Connection timed out)', 'reading upstream');
      this.reader.fail(true);
      return;
    }
    this.next(FT.TIMEOUT);
  }

  /** Records the header time and decides about retrying on the status (ngx_http_upstream_test_next). */
  headerReceived(status: number): boolean {
    const state = this.state!;
    state.headerTime = performance.now() - this.tryStart;
    if (state.status === 0) state.status = status;
    const mask = NEXT_STATUS[status];
    if (mask === undefined || !mayRetry(this.retryState(), mask, 2)) return false;
    this.next(mask);
    return true;
  }

  protected retryState(): RetryState {
    return {
      tries: this.chooser.tries, mask: this.conf.nextUpstream!, timeoutMs: this.conf.nextUpstreamTimeout!,
      elapsedMs: performance.now() - this.firstStart, requestSent: this.requestSent,
      replayable: this.sender.replayable, method: this.r.method,
    };
  }

  /**
   * The response is invalid (bad header, too big header, bad chunked before the head was sent).
   * `unread`: bytes beyond proxy_buffer_size, which nginx never reads (not in $upstream_bytes_received).
   */
  invalidHeader(unread = 0): void {
    this.state!.bytesReceived -= unread;
    this.next(FT.INVALID_HEADER);
  }

  /** The upstream closed before sending a complete head. */
  prematureClose(): void {
    this.log('error', 'upstream prematurely closed connection');
    this.next(FT.ERROR);
  }

  protected closeConnection(): void {
    const c = this.conn;
    this.conn = undefined;
    this.reader = undefined;
    if (c) c.destroy();
  }

  /** The response head is being sent to the client: from now on no retry. */
  headerSent(): void {
    this.settled = true;
  }

  pauseUpstream(): void {
    const c = this.conn;
    if (!c) return;
    c.socket.pause();
    // no proxy_read_timeout while we are the ones not reading
    c.setTimeout(0);
  }

  resumeUpstream(): void {
    const c = this.conn;
    if (!c) return;
    c.setTimeout(this.conf.readTimeout);
    c.socket.resume();
  }

  /** The upstream response is complete; `keepalive` says whether the connection may be reused. */
  upstreamDone(keepalive: boolean): void {
    const c = this.conn;
    this.closeTry(PEER_OK);
    this.conn = undefined;
    if (!c) return;
    const pool = this.pool;
    if (keepalive && this.requestBodySent && pool && pool.accepts(c)) pool.put(c);
    else c.destroy();
  }

  /** Fills the try's final figures and frees the peer (ngx_http_upstream_finalize_request). */
  protected closeTry(peerState: number): void {
    const s = this.state;
    if (s && s.responseTime === -1) {
      s.responseTime = performance.now() - this.tryStart;
      if (this.reader) s.responseLength = this.reader.bodyBytes;
      if (this.conn) s.bytesSent = this.conn.sent;
    }
    if (this.peerHeld) {
      this.peerHeld = false;
      this.chooser.free(peerState);
    }
  }

  /** The tunnel of an upgraded connection closed. */
  tunnelClosed(): void {
    const c = this.conn;
    this.closeTry(PEER_OK);
    this.conn = undefined;
    c?.destroy();
    this.relayDone();
  }

  /** The client socket no longer reports to this exchange. */
  protected forget(): void {
    unwatchClient(this.r.sink.client, this);
  }
}

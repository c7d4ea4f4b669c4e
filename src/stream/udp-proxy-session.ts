/**
 * One proxied UDP session (ngx_stream_proxy_module with SOCK_DGRAM): a
 * connected UDP socket to the chosen peer; each client datagram is sent
 * as one datagram (`packets from client`, nginx's u->requests), each
 * datagram from the peer goes back to the client (u->responses). The
 * session ends as nginx's ngx_stream_proxy_test_finalize decides: once
 * `proxy_requests` datagrams came (later ones from the same address start
 * a new session) and `proxy_responses` answers per request went back
 * ("udp done"), or after `proxy_timeout` without traffic ("udp timed out"
 * when the answers expected came, else "upstream timed out" and 502).
 * There is no next upstream once a datagram was sent; a peer that refuses
 * (ICMP port unreachable) counts as failed.
 */
import dgram from 'node:dgram';
import { sysErrorText } from '../conf/errors.ts';
import { LogLevel } from '../core/error-log.ts';
import { nextConnectionNumber } from '../core/shared.ts';
import { addressName } from '../upstream/address.ts';
import type { Peer } from '../upstream/peer.ts';
import { PEER_FAILED, PEER_OK } from '../upstream/round-robin.ts';
import type { RoundRobinPicker } from '../upstream/round-robin.ts';
import { Status } from './conf.ts';
import { rate } from './proxy-session.ts';
import type { ProxySettings } from './proxy-session.ts';
import { choosePeers, localAddress } from './proxy-target.ts';
import type { PeersUser, ProxyTarget } from './proxy-target.ts';
import { newTry } from './session.ts';
import type { StreamSession, UpstreamTry } from './session.ts';
import type { UdpClient } from './udp.ts';

/** proxy_responses' default: every datagram from the peer is passed on until the timeout. */
const ALL_RESPONSES = 0x7fffffff;

export class UdpProxy implements PeersUser {
  private readonly s: StreamSession;
  private readonly client: UdpClient;
  private readonly conf: ProxySettings;
  private picker: RoundRobinPicker | undefined;
  private listName = '';
  private upstream: dgram.Socket | undefined;
  private peer: Peer | undefined;
  private state: UpstreamTry | undefined;
  private readonly tries: UpstreamTry[] = [];
  private tryStart = 0;
  private connected = false;
  /** Datagrams from the client waiting for the upstream socket. */
  private readonly queue: Buffer[] = [];
  private requests = 0;
  private responses = 0;
  /** Bytes from the peer (u->received) and to it (pc->sent). */
  private received = 0;
  private upstreamSent = 0;
  /** The peer refused (a read or write error): it is freed as failed. */
  private peerError = false;
  /** Datagrams handed to the upstream socket and not sent yet. */
  private sending = 0;
  /** Client → peer and peer → client, each held back by its rate. */
  private readonly up: DatagramGate;
  private readonly down: DatagramGate;
  done = false;

  constructor(s: StreamSession, conf: ProxySettings) {
    this.s = s;
    this.client = s.socket as unknown as UdpClient;
    this.conf = conf;
    const startSec = Math.floor(Date.now() / 1000);
    this.up = new DatagramGate(rate(conf.uploadRate, s), startSec, () => s.received, this.request);
    this.down = new DatagramGate(rate(conf.downloadRate, s), startSec, () => this.received, this.response);
    s.upstreamStates = this.tries;
    s.logContext = this.logContext;
    s.terminate = () => this.finish(Status.OK);
  }

  start(target: ProxyTarget): void {
    this.client.on('data', this.onClientData);
    this.client.setTimeout(this.conf.timeout, this.onTimeout);
    choosePeers(this.s, target, this.conf.nextUpstreamTries, this);
  }

  usePicker(picker: RoundRobinPicker, name: string): void {
    this.picker = picker;
    this.listName = name;
    this.connect();
  }

  readonly fail = (status: number): void => this.finish(status);

  /** ngx_stream_proxy_connect for a datagram peer: connect() is local, so only a bind can fail. */
  private connect(): void {
    this.s.action = 'connecting to upstream';
    this.tryStart = performance.now();
    const peer = this.picker!.get() as Peer | undefined;
    const state = newTry(peer ? peer.name : this.listName);
    this.state = state;
    this.tries.push(state);
    if (!peer) {
      this.s.error(LogLevel.error, 'no live upstreams');
      this.finish(Status.BAD_GATEWAY);
      return;
    }
    nextConnectionNumber();
    this.peer = peer;
    const host = peer.addr.host;
    if (host === undefined) {
      // nginx proxies datagrams to unix sockets too; Node's dgram has no unix datagram sockets
      this.s.error(LogLevel.error, 'udp proxying to a unix socket is not supported by gatehouse');
      this.finish(Status.BAD_GATEWAY);
      return;
    }
    const sock = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
    this.upstream = sock;
    sock.on('message', this.onUpstreamMessage);
    sock.on('error', this.onUpstreamError);
    const local = localAddress(this.s, this.conf.bind);
    const connect = () => sock.connect(peer.addr.port!, host, this.onConnect);
    if (local) sock.bind({ address: local.address, port: local.port ?? 0 }, connect);
    else connect();
  }

  private readonly onConnect = (): void => {
    if (this.done) return;
    const sock = this.upstream!;
    this.state!.connectTime = performance.now() - this.tryStart;
    this.connected = true;
    if (this.s.log.enabled(LogLevel.info)) {
      const a = sock.address();
      this.s.plain(LogLevel.info, `udp proxy ${addressName(a.address, a.port)} connected to ${this.peer!.name}`);
    }
    this.s.action = 'proxying connection';
    for (const d of this.queue.splice(0)) this.send(d);
    this.testFinalize();
  };

  private readonly onClientData = (d: Buffer): void => {
    if (this.done) return;
    // the first datagram was read with the session (nginx's c->buffer): no rate holds it
    if (this.requests === 0) this.request(d);
    else this.up.push(d);
  };

  /** A client datagram read (past proxy_upload_rate): the first one was counted as the session started. */
  private readonly request = (d: Buffer): void => {
    if (this.requests > 0) this.s.received += d.length;
    this.requests++;
    if (this.connected) this.send(d);
    else this.queue.push(d);
    this.testFinalize();
  };

  private send(d: Buffer): void {
    this.sending++;
    this.upstream!.send(d, (err) => {
      this.sending--;
      if (!err) this.upstreamSent += d.length;
      this.testFinalize();
    });
  }

  private readonly onUpstreamMessage = (d: Buffer): void => {
    if (this.done) return;
    if (this.state!.firstByteTime === -1) this.state!.firstByteTime = performance.now() - this.tryStart;
    this.down.push(d);
  };

  /** A datagram from the peer read (past proxy_download_rate): on to the client. */
  private readonly response = (d: Buffer): void => {
    this.responses++;
    this.received += d.length;
    this.client.write(d, () => this.testFinalize());
  };

  /** A refused peer (ICMP port unreachable) reads as an error: nginx counts it as an empty answer. */
  private readonly onUpstreamError = (err: NodeJS.ErrnoException): void => {
    if (this.done) return;
    if (!this.connected) {
      this.s.error(LogLevel.error, `connect() failed ${sysErrorText(err)}`);
      this.peerError = true;
      this.finish(Status.BAD_GATEWAY);
      return;
    }
    this.s.action = 'proxying and reading from upstream';
    this.s.error(LogLevel.error, `recv() failed ${sysErrorText(err)}`);
    this.s.action = 'proxying connection';
    this.peerError = true;
    this.responses++;
    this.testFinalize();
  };

  /** ngx_stream_proxy_test_finalize for datagrams. */
  private testFinalize(): void {
    if (this.done) return;
    const want = this.conf.requests;
    if (want && this.requests < want) return;
    if (want) this.client.detach();
    const per = this.conf.responses;
    if (per === ALL_RESPONSES || this.responses < per * this.requests) return;
    if (!this.connected || this.sending || this.client.writableLength) return;
    this.s.plain(LogLevel.info, `udp done${this.countsText()}`);
    this.finish(Status.OK);
  }

  /** proxy_timeout passed without a datagram either way. */
  private readonly onTimeout = (): void => {
    if (this.done) return;
    const per = this.conf.responses;
    if (per === ALL_RESPONSES || this.responses >= per * this.requests) {
      this.s.plain(LogLevel.info, `udp timed out${this.countsText()}`);
      this.finish(Status.OK);
      return;
    }
    this.s.error(LogLevel.error, 'upstream timed out (110: Connection timed out)');
    this.peerError = true;
    this.finish(Status.BAD_GATEWAY);
  };

  private countsText(): string {
    return `, packets from/to client:${this.requests}/${this.responses}${this.bytesText()}`;
  }

  private bytesText(): string {
    return `, bytes from/to client:${this.s.received}/${this.s.sent}, bytes from/to upstream:${this.received}/${this.upstreamSent}`;
  }

  private readonly logContext = (): string => {
    const peer = this.state?.peer;
    return (peer ? `, upstream: "${peer}"` : '') + this.bytesText();
  };

  /** ngx_stream_proxy_finalize: records the try, frees the peer (failed if it refused), closes the socket. */
  private finish(status: number): void {
    if (this.done) return;
    this.done = true;
    const state = this.state;
    if (state) {
      if (state.sessionTime === -1) state.sessionTime = performance.now() - this.tryStart;
      state.bytesReceived = this.received;
      state.bytesSent = this.upstreamSent;
    }
    this.up.stop();
    this.down.stop();
    if (this.picker?.current) this.picker.free(this.peerError ? PEER_FAILED : PEER_OK);
    this.upstream?.close();
    this.s.finalize(status);
  }
}

/**
 * proxy_upload_rate / proxy_download_rate for datagrams, as
 * ngx_stream_proxy_process: a datagram is read only while fewer than
 * `rate × (seconds since start + 1)` bytes were, never split, and each one
 * read holds the next back for `size / rate`.
 */
class DatagramGate {
  private readonly queue: Buffer[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly rate: number;
  private readonly startSec: number;
  private readonly counted: () => number;
  private readonly pass: (d: Buffer) => void;

  constructor(rate: number, startSec: number, counted: () => number, pass: (d: Buffer) => void) {
    this.rate = rate;
    this.startSec = startSec;
    this.counted = counted;
    this.pass = pass;
  }

  push(d: Buffer): void {
    if (this.rate === 0) return this.pass(d);
    this.queue.push(d);
    if (!this.timer) this.release();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.queue.length = 0;
  }

  private readonly release = (): void => {
    this.timer = undefined;
    while (this.queue.length) {
      const limit = this.rate * (Math.floor(Date.now() / 1000) - this.startSec + 1) - this.counted();
      if (limit <= 0) {
        this.timer = setTimeout(this.release, Math.floor((-limit * 1000) / this.rate) + 1);
        return;
      }
      const d = this.queue.shift()!;
      this.pass(d);
      const delay = Math.floor((d.length * 1000) / this.rate);
      if (delay > 0) {
        this.timer = setTimeout(this.release, delay);
        return;
      }
    }
  };
}

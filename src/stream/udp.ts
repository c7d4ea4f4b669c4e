/**
 * UDP sessions (nginx's ngx_stream_udp_handler and its pseudo-connections):
 * the first datagram from a client address starts a session, later ones
 * from the same address go to it while it lives (nginx keeps them in a
 * tree per listener; here a map per listener and worker). A session sees
 * its client as a duplex stream of datagrams — each chunk read is one
 * datagram, each write one datagram sent back from the listening socket —
 * so the session, `return` and the phases treat it as they treat a TCP
 * socket.
 */
import type { RemoteInfo, Socket as DgramSocket } from 'node:dgram';
import { Duplex } from 'node:stream';

/** A client of a UDP listener, seen as a socket (only what stream sessions use). */
export class UdpClient extends Duplex {
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly localAddress: string;
  readonly localPort: number;
  /** Bytes sent to the client (nginx's c->sent). */
  bytesWritten = 0;
  private readonly socket: DgramSocket;
  private readonly table: Map<string, UdpClient>;
  private readonly id: string;
  private detached = false;
  private idleMs = 0;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(socket: DgramSocket, from: RemoteInfo, table: Map<string, UdpClient>) {
    // object mode: a datagram is never merged with the next one
    super({ objectMode: true, allowHalfOpen: true });
    this.socket = socket;
    this.table = table;
    this.remoteAddress = from.address;
    this.remotePort = from.port;
    const local = socket.address();
    this.localAddress = local.address;
    this.localPort = local.port;
    this.id = `${from.address}|${from.port}`;
    table.set(this.id, this);
  }

  /** A datagram from this client (`datagram` reports its size at once, before it is read). */
  deliver(msg: Buffer): void {
    this.touch();
    this.emit('datagram', msg.length);
    this.push(msg);
  }

  /**
   * Later datagrams from this address start a new session (nginx's
   * ngx_delete_udp_connection, once proxy_requests are in).
   */
  detach(): void {
    if (this.detached) return;
    this.detached = true;
    if (this.table.get(this.id) === this) this.table.delete(this.id);
  }

  override _read(): void { /* datagrams are pushed as they come */ }

  override _write(chunk: Buffer | string, encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    const data = typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk;
    this.touch();
    this.socket.send(data, this.remotePort, this.remoteAddress, (err) => {
      if (!err) this.bytesWritten += data.length;
      done(err);
    });
  }

  override _destroy(err: Error | null, done: (err: Error | null) => void): void {
    this.detach();
    if (this.idleTimer) clearTimeout(this.idleTimer);
    done(err);
  }

  /** As net.Socket's: `timeout` is emitted after `ms` without a datagram either way. */
  setTimeout(ms: number, onTimeout?: () => void): this {
    if (onTimeout) this.once('timeout', onTimeout);
    this.idleMs = ms;
    this.touch();
    return this;
  }

  setNoDelay(): this {
    return this;
  }

  private touch(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = this.idleMs > 0 ? setTimeout(() => this.emit('timeout'), this.idleMs) : undefined;
  }
}

/**
 * The datagram handler of one UDP listener in one worker: a known client's
 * datagram goes to its session, another starts one with `accept`.
 */
export function udpDispatcher(accept: (client: UdpClient) => void): (msg: Buffer, from: RemoteInfo, socket: DgramSocket) => void {
  const clients = new Map<string, UdpClient>();
  return (msg, from, socket) => {
    let client = clients.get(`${from.address}|${from.port}`);
    if (!client || client.destroyed) {
      client = new UdpClient(socket, from, clients);
      accept(client);
    }
    client.deliver(msg);
  };
}

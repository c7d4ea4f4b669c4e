/**
 * A `101 Switching Protocols` from the upstream to a request that asked for
 * an upgrade turns the client connection into a two-way tunnel
 * (ngx_http_upstream_upgrade): bytes flow both ways as they come, with
 * backpressure; `proxy_read_timeout` limits how long the tunnel may stay
 * silent; either side closing ends it.
 */
import type { Socket } from 'node:net';
import { requestLog } from '../request-log.ts';
import { endBody } from '../response.ts';
import type { UpstreamRequest } from './upstream-request.ts';

class Tunnel {
  private readonly u: UpstreamRequest;
  private readonly client: Socket;
  private readonly upstream: Socket;
  private timer: NodeJS.Timeout;
  private done = false;

  constructor(u: UpstreamRequest, client: Socket, upstream: Socket) {
    this.u = u;
    this.client = client;
    this.upstream = upstream;
    this.timer = setTimeout(this.onIdle, u.conf.readTimeout);
    upstream.setTimeout(0);
    client.setTimeout(0);
    client.on('data', this.fromClient);
    client.on('end', this.end);
    client.on('close', this.end);
    client.on('error', this.end);
    client.on('drain', this.clientDrained);
    // upstream events arrive through the UpstreamRequest (its ConnectionUser)
  }

  fromUpstream(chunk: Buffer): void {
    if (this.done) return;
    this.timer.refresh();
    this.u.r.bodyBytesSent += chunk.length;
    if (!this.client.write(chunk)) this.upstream.pause();
  }

  upstreamDrained(): void {
    this.client.resume();
  }

  private fromClient = (chunk: Buffer): void => {
    if (this.done) return;
    this.timer.refresh();
    if (!this.upstream.write(chunk)) this.client.pause();
  };

  private clientDrained = (): void => {
    this.upstream.resume();
  };

  private onIdle = (): void => {
    if (this.done) return;
    requestLog(this.u.r).error('upstream timed out (110: Connection timed out) while proxying upgraded connection');
    this.close();
  };

  /** Either side finished or failed: close both, once what was written is flushed. */
  end = (): void => {
    this.close();
  };

  private close(): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.client.off('data', this.fromClient);
    this.u.tunnelClosed();
    this.upstream.destroy();
    this.client.end();
    this.client.destroySoon?.();
  }
}

/** Switches `u`'s request to a tunnel; `held` is upstream data after the 101 head. */
export function startUpgrade(u: UpstreamRequest, held: Buffer[]): void {
  const r = u.r;
  const client = r.sink.socket;
  const conn = u.conn;
  const early = client && conn ? r.conn.takeForTunnel(r) : undefined;
  if (!client || !conn || !early) {
    // the client connection cannot be taken over (HTTP/2, or a body still arriving): end the exchange
    u.finalize(0);
    endBody(r);
    return;
  }
  // the head goes out now; the response stays open, so the tunnel's bytes count as its body ($bytes_sent)
  r.sink.flushHead();
  const tunnel = new Tunnel(u, client, conn.socket);
  u.tunnel = tunnel;
  for (const b of held) tunnel.fromUpstream(b);
  if (early.length) conn.socket.write(early);
  u.resumeUpstream();
  conn.setTimeout(0);
}

export type { Tunnel };

/**
 * Idle upstream connections of one group in one worker
 * (ngx_http_upstream_keepalive_module): at most `keepalive` connections,
 * most recently used first; an idle connection is closed when the peer
 * closes it or sends anything, after `keepalive_timeout`, and is not kept
 * after `keepalive_requests` requests or `keepalive_time`.
 */
import type { ChosenPeer } from './peer-chooser.ts';
import type { ConnectionUser, UpstreamConnection } from './connection.ts';

/** Upstream keepalive settings (`keepalive`, `keepalive_requests`, `keepalive_time`, `keepalive_timeout`). */
export interface KeepaliveConf {
  max: number;
  requests: number;
  timeMs: number;
  timeoutMs: number;
}

export class KeepalivePool implements ConnectionUser {
  readonly conf: KeepaliveConf;
  /** Idle connections, the most recently released last. */
  private readonly idle: UpstreamConnection[] = [];
  private closed = false;

  constructor(conf: KeepaliveConf) {
    this.conf = conf;
  }

  /** An idle connection to `peer`, most recently used first. */
  take(peer: ChosenPeer): UpstreamConnection | undefined {
    const idle = this.idle;
    for (let i = idle.length - 1; i >= 0; i--) {
      const c = idle[i];
      if (c.peer.addr.name !== peer.addr.name) continue;
      idle.splice(i, 1);
      return c;
    }
    return undefined;
  }

  /** Whether a connection that just finished a request may be kept (before calling put). */
  accepts(conn: UpstreamConnection): boolean {
    return !this.closed && !conn.broken && conn.requests < this.conf.requests
      && Date.now() - conn.startMs <= this.conf.timeMs;
  }

  /** Keeps `conn` idle; the oldest idle connection is closed when the pool is full. */
  put(conn: UpstreamConnection): void {
    if (this.idle.length >= this.conf.max) this.idle.shift()?.destroy();
    conn.user = this;
    conn.setTimeout(this.conf.timeoutMs);
    conn.socket.resume();
    this.idle.push(conn);
  }

  /** Closes every idle connection; later releases are refused (worker shutting down). */
  close(): void {
    this.closed = true;
    for (const c of this.idle.splice(0)) c.destroy();
  }

  private drop(conn: UpstreamConnection): void {
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    conn.destroy();
  }

  onConnect(): void { /* idle connections are connected */ }
  onDrain(): void { /* nothing is written while idle */ }
  /** Anything from an idle connection (data, close) ends it, as nginx's close handler does. */
  onData(conn: UpstreamConnection): void { this.drop(conn); }
  onEnd(conn: UpstreamConnection): void { this.drop(conn); }
  onError(conn: UpstreamConnection): void { this.drop(conn); }
  onTimeout(conn: UpstreamConnection): void { this.drop(conn); }
}

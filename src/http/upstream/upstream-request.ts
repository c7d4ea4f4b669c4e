/**
 * One request's exchange with its upstream (nginx's ngx_http_upstream_t):
 * ask the peer chooser where to go, connect (or reuse a kept-alive
 * connection), send the head and body the protocol module made, read the
 * response head through the protocol's processHeader, retry on the next peer
 * as `*_next_upstream` allows, then hand the head to the client and relay the
 * body. The socket side of a try (the peer, connecting, the socket's events,
 * the try's figures) is the base class UpstreamTry (upstream-try.ts); this
 * class starts the exchange, sends the request once connected, moves to the
 * next try and finalizes.
 */
import { performance } from 'node:perf_hooks';
import type tls from 'node:tls';
import type { ConnectionUser, UpstreamConnection } from '../../upstream/connection.ts';
import { PEER_FAILED, PEER_NEXT, PEER_OK } from '../../upstream/round-robin.ts';
import { DONE } from '../http-conf.ts';
import { finalize } from '../phases.ts';
import { requestLog } from '../request-log.ts';
import { terminate } from '../request-body.ts';
import { mainRequest } from '../subrequest.ts';
import type { UpstreamDerived, UpstreamLoc } from './conf.ts';
import { FT } from './conf.ts';
import type { ClientWatcher } from './client-watch.ts';
import { failureStatus, mayRetry } from './next-upstream.ts';
import { ResponseReader } from './response-reader.ts';
import { NO_BODY } from './send-body.ts';
import type { BodyTarget } from './send-body.ts';
import { verifyPeer } from './tls.ts';
import { DONE_STATE, SENDING, UpstreamTry } from './upstream-try.ts';

export class UpstreamRequest<C extends UpstreamLoc = UpstreamLoc, D extends UpstreamDerived = UpstreamDerived>
  extends UpstreamTry<C, D> implements ConnectionUser, BodyTarget, ClientWatcher {
  start(): void {
    // the protocol's cache (proxy_cache): a cached response is served without connecting upstream
    if (this.protocol.cache?.lookup(this)) return;
    this.connect();
  }

  /**
   * What every protocol does once this try's connection is up: the upstream's
   * certificate checked, connect time noted, the response reader made. False
   * when the connection is not this try's or the check failed (next try asked).
   */
  protected connected(conn: UpstreamConnection): boolean {
    if (conn !== this.conn || !this.state) return false;
    if (this.tls && !this.cached) {
      const bad = verifyPeer(this.tls, conn.socket as tls.TLSSocket, this.conf.ssl?.verifyDepth ?? 1);
      if (bad) {
        this.log('error', bad, 'SSL handshaking to upstream');
        this.next(FT.ERROR);
        return false;
      }
    }
    if (this.state.connectTime === -1) this.state.connectTime = performance.now() - this.tryStart;
    this.phase = SENDING;
    this.requestSent = true;
    this.reader = new ResponseReader(this);
    return true;
  }

  onConnect(conn: UpstreamConnection): void {
    if (!this.connected(conn)) return;
    conn.setTimeout(this.conf.sendTimeout);
    const s = conn.socket;
    if (this.sender === NO_BODY) {
      // nothing to write after the head: no cork, one write
      s.write(this.head, 'latin1');
      this.bodySent();
      return;
    }
    s.cork();
    s.write(this.head, 'latin1');
    this.sender.start(conn, this);
    s.uncork();
  }

  bodyFailed(status: number): void {
    if (status === 408 || status === 499) {
      // nginx terminates the request: no response, the connection closes
      this.finalize(0);
      terminate(this.r, status);
      return;
    }
    this.finalize(status);
  }

  /** ngx_http_upstream_next: end this try and try another peer, or fail. */
  next(ft: number): void {
    if (this.finished) return;
    // nginx's debug line, which OpenResty's tests count tries by
    requestLog(this.r).debug(`http next upstream, ${ft.toString(16)}`);
    const state = this.state!;
    if (this.peerHeld) {
      this.peerHeld = false;
      if (this.conn) state.bytesSent = this.conn.sent;
      const disabled = this.chooser.free(ft === FT.HTTP_403 || ft === FT.HTTP_404 ? PEER_NEXT : PEER_FAILED);
      if (disabled) this.log('warn', 'upstream server temporarily disabled');
    }
    if (ft === FT.TIMEOUT) this.log('error', 'upstream timed out (110: Connection timed out)');
    if (this.cached && ft === FT.ERROR) this.chooser.tries++;
    const status = failureStatus(ft);
    if (this.r.finished || this.r.sink.destroyed) { this.finalize(499); return; }
    state.status = status;
    if (!mayRetry(this.retryState(), ft, 1)) {
      this.finalize(status);
      return;
    }
    this.lastFailure = ft;
    this.lastStatus = status;
    this.closeConnection();
    this.protocol.reinitRequest?.(this);
    this.connect();
  }

  /** Ends the exchange with `rc`: an error status before the head went out, else closes the upstream side. */
  finalize(rc: number): void {
    if (this.finished) return;
    this.finished = true;
    this.forget();
    this.protocol.finalizeRequest?.(this, rc);
    this.phase = DONE_STATE;
    this.closeTry(PEER_OK);
    const c = this.conn;
    this.conn = undefined;
    if (c) c.destroy();
    this.reader?.abort();
    if (!this.settled) {
      this.settled = true;
      // the protocol's cache (proxy_cache_use_stale): the stale cached response instead of the error
      if (rc !== 0 && rc !== 499 && this.protocol.cache?.serveStale(this, rc)) return;
      // the handler returned DONE long ago: the error page or nginx's page is sent from here
      if (rc !== DONE && rc !== 0 && rc !== 499) {
        finalize(this.r, rc).catch((err: Error) => {
          requestLog(this.r).alert(`finalizing a proxied request failed: ${err.stack ?? err}`);
          this.r.sink.abort();
        });
      }
    }
  }

  /** The relay finished writing (ok) or the client went away. */
  relayDone(): void {
    if (!this.finished) this.protocol.finalizeRequest?.(this, 0);
    this.finished = true;
    this.forget();
  }

  clientClosed(): void {
    if (this.finished || this.r.sink.finished) return;
    // a subrequest made after the main response ended (ngx.eof, then ngx.location.capture) runs on:
    // nginx no longer reads the connection for it, so it never sees the client go
    const main = mainRequest(this.r);
    if (main !== this.r && main.sink.finished) return;
    this.forget();
    if (this.conf.ignoreClientAbort && !this.settled) return;
    this.log('info', this.conn ? 'client prematurely closed connection, so upstream connection is closed too' : 'client prematurely closed connection',
      this.reader?.inBody ? 'sending to client' : this.action);
    this.finalize(499);
    // no response: the connection closes and the request is logged with 499 (nginx's terminate)
    if (!this.r.sink.destroyed) terminate(this.r, 499);
  }
}

/**
 * What happens to an accepted stream connection (ngx_stream_init_connection,
 * ngx_stream_core_run_phases): a session for the address's server, nginx's
 * `client … connected to …` info line, the phases before content (access,
 * ...), then the server's content handler (proxy_pass, return), which
 * finalizes the session. Also the per-worker registry of live sessions that
 * worker_shutdown_timeout ends.
 */
import type { Socket } from 'node:net';
import { LogLevel, mainErrorLog } from '../core/error-log.ts';
import type { ErrorLog } from '../core/error-log.ts';
import { DECLINED, DONE, OK, Status } from './conf.ts';
import type { StreamAddress, StreamMainConf } from './conf.ts';
import { readProxyProtocol } from '../core/proxy-protocol.ts';
import { StreamSession } from './session.ts';
import type { UdpClient } from './udp.ts';

/** Sessions of one stream block in one worker. */
export class StreamSessions {
  readonly live = new Set<StreamSession>();
  private readonly remove = (s: StreamSession) => { this.live.delete(s); };
  private readonly main: StreamMainConf;
  private readonly logOf: (address: StreamAddress) => ErrorLog;
  private readonly settings: (address: StreamAddress) => SessionSettings;

  constructor(main: StreamMainConf, logOf: (address: StreamAddress) => ErrorLog, settings: (address: StreamAddress) => SessionSettings) {
    this.main = main;
    this.logOf = logOf;
    this.settings = settings;
  }

  /** Serves an accepted connection on `address`. */
  accept(address: StreamAddress, socket: Socket): StreamSession {
    // the proxy passes half-closes on itself (proxy_half_close), so Node must not end the socket on FIN
    socket.allowHalfOpen = true;
    const s = new StreamSession(this.main, address, socket, this.logOf(address) ?? mainErrorLog(), this.remove);
    this.live.add(s);
    socket.on('error', (err) => { if (!s.finalized) s.onClientError(err); });
    // closed under us (after an error or by the worker): the session ends with what it has
    socket.on('close', () => { if (!s.finalized) s.terminate(); });
    // nginx logs this before the connection number is attached, so the number is part of the text
    if (s.log.enabled(LogLevel.info)) s.log.info(`*${s.number} ${address.listen.udp ? 'udp ' : ''}client ${clientText(s)} connected to ${address.listen.addrText}`);
    void start(s, this.settings(address));
    return s;
  }

  /** A UDP client's datagrams (src/stream/udp.ts) served as a session on `address`. */
  acceptUdp(address: StreamAddress, client: UdpClient): void {
    // the session reads and writes it as a socket: only what a TCP socket offers it is used
    const s = this.accept(address, client as unknown as Socket);
    // nginx counts the first datagram as read when the session starts; the handler counts the rest as it reads them
    client.once('datagram', (n: number) => { s.received += n; });
  }

  /** The worker stops: UDP sessions end at once, as nginx's do when its worker exits. */
  endUdpSessions(): void {
    for (const s of [...this.live]) {
      if (!s.listen.udp) continue;
      s.plain(LogLevel.info, 'disconnected on shutdown');
      s.terminate();
    }
  }

  /** worker_shutdown_timeout (or a fast stop): every session still running ends now. */
  terminateAll(): void {
    for (const s of [...this.live]) {
      s.error(LogLevel.info, 'shutdown timeout');
      s.terminate();
    }
  }
}

function clientText(s: StreamSession): string {
  if (s.listen.spec.path !== undefined) return 'unix:';
  return s.remoteAddress.includes(':') ? `[${s.remoteAddress}]:${s.remotePort}` : `${s.remoteAddress}:${s.remotePort}`;
}

/** What the core module decides for the sessions of a server. */
export interface SessionSettings {
  tcpNodelay: boolean;
  proxyProtocolTimeout: number;
}

/** Reads the PROXY protocol header when the address has one (ngx_stream_proxy_protocol_handler). */
async function readHeader(s: StreamSession, timeoutMs: number): Promise<boolean> {
  s.action = 'reading PROXY protocol';
  const r = await readProxyProtocol(s.socket, timeoutMs);
  if (s.finalized) return false;
  if (r === 'timeout') {
    s.error(LogLevel.info, 'client timed out (110: Connection timed out)');
    s.finalize(Status.OK);
    return false;
  }
  if (r === 'closed') {
    s.finalize(Status.OK);
    return false;
  }
  if (r && 'error' in r) {
    s.error(LogLevel.error, r.error);
    s.finalize(Status.BAD_REQUEST);
    return false;
  }
  s.proxyProtocol = r;
  s.action = 'initializing session';
  return true;
}

/** Runs the phase handlers in order, then the content handler (ngx_stream_core_content_phase). */
async function start(s: StreamSession, settings: SessionSettings): Promise<void> {
  try {
    if (s.listen.proxyProtocol && !await readHeader(s, settings.proxyProtocolTimeout)) return;
    for (const handlers of s.main.phases) {
      for (const h of handlers) {
        let rc = h(s);
        if (typeof rc !== 'number') rc = await rc;
        if (s.finalized) return;
        if (rc === DECLINED) continue;
        if (rc === OK) break;
        if (rc === DONE) return;
        s.finalize(rc);
        return;
      }
    }
    s.action = undefined;
    if (s.listen.spec.path === undefined) s.socket.setNoDelay(settings.tcpNodelay);
    if (!s.server.handler) {
      s.finalize(Status.INTERNAL_SERVER_ERROR);
      return;
    }
    s.server.handler(s);
  } catch (e) {
    s.log.alert(`stream session failed: ${(e as Error).stack ?? e}`);
    s.finalize(Status.INTERNAL_SERVER_ERROR);
  }
}

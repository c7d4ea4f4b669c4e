/**
 * Noticing a client that goes away while its request is proxied: nginx takes
 * a closed connection (or a FIN) for an aborted request
 * (ngx_http_upstream_check_broken_connection). One pair of listeners per
 * client connection serves all its requests; the socket points at the
 * exchange currently answering on it.
 */
import type { ResponseSink } from '../response-sink.ts';

/** The client side a response reports on (its socket, HTTP/2 stream or a subrequest's stand-in). */
type Client = NonNullable<ResponseSink['client']>;

/** What is told about the client going away. */
export interface ClientWatcher {
  clientClosed(): void;
}

const EXCHANGE = Symbol('proxyExchange');

type WatchedSocket = Client & { [EXCHANGE]?: ClientWatcher | null };

function onClientGone(this: WatchedSocket): void {
  this[EXCHANGE]?.clientClosed();
}

/** From now on, `socket` going away is reported to `w`. */
export function watchClient(socket: Client, w: ClientWatcher): void {
  const s = socket as WatchedSocket;
  if (s[EXCHANGE] === undefined) {
    // 'close' ahead of the response's own listener, so the log phase sees the request's end (499, timings)
    s.prependListener('close', onClientGone);
    s.on('end', onClientGone);
  }
  s[EXCHANGE] = w;
}

/** `w` no longer wants to hear about `socket`. */
export function unwatchClient(socket: Client | null, w: ClientWatcher): void {
  const s = socket as WatchedSocket | null;
  if (s && s[EXCHANGE] === w) s[EXCHANGE] = null;
}

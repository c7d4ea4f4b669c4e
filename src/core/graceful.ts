/**
 * Graceful shutdown (reload, QUIT) of a connection that holds no request.
 *
 * Idle connections — keepalive between requests, or accepted and silent —
 * close, but a client that has just connected, or just received a response
 * on a keepalive connection, has usually already sent its next request: it
 * is in flight or in the socket buffer, unread. Closing then would reset a
 * request nobody will retry (a fresh connection) — under load, a reload
 * would lose requests. So a connection closes only once it has been idle for
 * IDLE_GRACE_MS; a request that arrives before is served (with
 * `Connection: close`, the caller marks the connection closing).
 */
import type { Socket } from 'node:net';

export const IDLE_GRACE_MS = 250;

/** When the connection last went idle, and how many bytes it had read then. */
export interface IdleMark {
  idleSince: number;
  idleBytes: number;
}

/** Records that the connection just finished a request (call when its response is done). */
export function markIdle(mark: IdleMark, socket: Socket): void {
  mark.idleSince = Date.now();
  mark.idleBytes = socket.bytesRead;
}

/**
 * Closes `socket` once it has been idle for IDLE_GRACE_MS, unless a request
 * starts first: `busy()` true, or bytes read since the mark (a request head
 * arriving — it gets its response).
 */
export function closeWhenIdle(socket: Socket, mark: IdleMark, busy: () => boolean): void {
  const check = (): void => {
    if (socket.destroyed || busy() || socket.bytesRead !== mark.idleBytes) return;
    const wait = mark.idleSince + IDLE_GRACE_MS - Date.now();
    if (wait <= 0) socket.destroy();
    else setTimeout(check, wait);
  };
  check();
}

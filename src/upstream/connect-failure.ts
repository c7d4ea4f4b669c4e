/**
 * How a failed connect to a peer is logged, as nginx logs it. When connect()
 * itself fails (a unix socket, an address with no route: nginx's
 * ngx_event_connect_peer) the line names the peer and is crit unless the
 * network refused; a TCP failure found once the handshake ran (refused,
 * reset, timed out) is the later check's plain `connect() failed`, at error.
 */
import { LogLevel } from '../core/error-log.ts';
import { sysErrorText } from '../conf/errors.ts';

/** The errors ngx_event_connect_peer logs at error level (the rest are crit). */
const NETWORK_SAID_NO = new Set(['ECONNREFUSED', 'EAGAIN', 'ECONNRESET', 'ENETDOWN', 'ENETUNREACH', 'EHOSTDOWN', 'EHOSTUNREACH']);
/** What a non-blocking TCP connect() reports only later, from the handshake (Node cannot tell us which call failed). */
const AFTER_HANDSHAKE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH']);

/** The level and message for a connect to `peerName` that failed with `err`; `unix` for a unix-domain peer. */
export function connectFailure(err: NodeJS.ErrnoException, peerName: string, unix: boolean): { level: number; message: string } {
  const code = err.code ?? '';
  if (!unix && AFTER_HANDSHAKE.has(code)) return { level: LogLevel.error, message: `connect() failed ${sysErrorText(err)}` };
  return {
    level: NETWORK_SAID_NO.has(code) ? LogLevel.error : LogLevel.crit,
    message: `connect() to ${peerName} failed ${sysErrorText(err)}`,
  };
}

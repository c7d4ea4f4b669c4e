/**
 * HTTPS upstreams of a request: src/tls/upstream-tls.ts with the request's
 * variables and error log.
 */
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { upstreamTls } from '../../tls/upstream-tls.ts';
import type { UpstreamTls } from '../../tls/upstream-tls.ts';
export type { UpstreamTls } from '../../tls/upstream-tls.ts';
import type { UpstreamConf } from './conf.ts';

export { keepSessions, peerOptions, verifyPeer } from '../../tls/upstream-tls.ts';

/** The TLS settings for a request to `host` from a location configured with `c`; undefined (logged) when the client certificate cannot be loaded. */
export function tlsFor(r: HttpRequest, c: UpstreamConf, host: string): UpstreamTls | undefined {
  return upstreamTls(r, c.ssl ?? {}, host, (message) => requestLog(r).error(message));
}

/**
 * proxy_next_upstream's rules (ngx_http_upstream_next, ngx_http_upstream_test_next):
 * which failures and statuses may move a request to the next peer, and the
 * status the client gets when no try is left.
 */
import { FT } from './conf.ts';

/** Statuses proxy_next_upstream can retry on, with their condition bit. */
export const NEXT_STATUS: Record<number, number> = {
  500: FT.HTTP_500, 502: FT.HTTP_502, 503: FT.HTTP_503, 504: FT.HTTP_504,
  403: FT.HTTP_403, 404: FT.HTTP_404, 429: FT.HTTP_429,
};

const NON_IDEMPOTENT = new Set(['POST', 'LOCK', 'PATCH']);

/** The status for a failed try of kind `ft` (what the client gets if it was the last). */
export function failureStatus(ft: number): number {
  switch (ft) {
    case FT.TIMEOUT: case FT.HTTP_504: return 504;
    case FT.HTTP_500: return 500;
    case FT.HTTP_503: return 503;
    case FT.HTTP_403: return 403;
    case FT.HTTP_404: return 404;
    case FT.HTTP_429: return 429;
    default: return 502;
  }
}

export interface RetryState {
  /** Tries left after this one (the picker's count). */
  tries: number;
  /** The location's proxy_next_upstream mask and proxy_next_upstream_timeout. */
  mask: number;
  timeoutMs: number;
  /** ms since the first try. */
  elapsedMs: number;
  /** Some of the request reached the upstream (nginx's u->request_sent). */
  requestSent: boolean;
  /** The body can be sent again (not streamed with proxy_request_buffering off). */
  replayable: boolean;
  method: string;
}

/**
 * Whether a try that failed with `ft` may go on to another peer. `minTries`
 * is 1 for failures (a try left) and 2 for statuses (nginx's `tries > 1`).
 */
export function mayRetry(s: RetryState, ft: number, minTries: number): boolean {
  if (s.requestSent && NON_IDEMPOTENT.has(s.method)) ft |= FT.NON_IDEMPOTENT;
  return s.tries >= minTries && (s.mask & ft) === ft
    && !(s.requestSent && !s.replayable)
    && !(s.timeoutMs && s.elapsedMs >= s.timeoutMs);
}

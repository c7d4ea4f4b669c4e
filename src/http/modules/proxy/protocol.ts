/**
 * The proxy module as the upstream engine's HTTP protocol
 * (src/http/upstream/protocol.ts): nginx's ngx_http_proxy_process_status_line
 * and process_header over the bytes read so far, the copy of the accepted
 * head with proxy_hide_header, proxy_redirect and proxy_cookie_* applied,
 * and proxy_cache as the engine's cache. The request head itself is built
 * by index.ts (ngx_http_proxy_create_request) before the exchange starts.
 */
import type { UpstreamHead, UpstreamProtocol } from '../../upstream/protocol.ts';
import { proxyCache } from './cache.ts';
import type { DerivedConf, ProxyLoc, ProxyUpstream } from './conf.ts';
import { copyHeaders } from './headers-out.ts';
import { parseResponseHead } from '../../upstream/response-head.ts';

/** Offset just after the blank line ending the head in `b`, or -1. */
function headEnd(b: Buffer): number {
  let i = b.indexOf(10);
  while (i >= 0) {
    const n = b[i + 1];
    if (n === 10) return i + 2;
    if (n === 13 && b[i + 2] === 10) return i + 3;
    if (n === undefined || (n === 13 && b[i + 2] === undefined)) return -1;
    i = b.indexOf(10, i + 1);
  }
  return -1;
}

function startsLikeStatusLine(b: Buffer): boolean {
  const p = 'HTTP/';
  for (let i = 0; i < 5 && i < b.length; i++) if (b[i] !== p.charCodeAt(i)) return false;
  return true;
}

/** The head in `b` (at most proxy_buffer_size bytes), HTTP/0.9 when it does not start like a status line. */
function processHeader(u: ProxyUpstream, b: Buffer): UpstreamHead | undefined {
  const limit = u.conf.bufferSize!;
  let end = headEnd(b);
  if (end < 0) {
    // HTTP/0.9 shows in the first bytes: enough of them to fail the status line parse
    if (!startsLikeStatusLine(b)) end = Math.min(b.length, 5);
    else if (b.length >= limit) {
      u.log('error', 'upstream sent too big header');
      u.invalidHeader(b.length - limit);
      return undefined;
    } else return undefined;
  }
  if (end > limit) {
    u.log('error', 'upstream sent too big header');
    u.invalidHeader(b.length - limit);
    return undefined;
  }
  const text = b.toString('latin1', 0, end);
  const head = parseResponseHead(text, (m) => u.log('warn', m));
  if (head === undefined) return undefined;
  if ('error' in head) {
    u.log('error', head.error);
    u.invalidHeader();
    return undefined;
  }
  if (head.http09) u.log('error', 'upstream sent no valid HTTP/1.0 header');
  return head;
}

export const proxyProtocol: UpstreamProtocol<ProxyLoc, DerivedConf> = {
  processHeader,
  copyHeaders: (u, head) => copyHeaders(u.r, head, u.d, u.conf.ignoreHeaders),
  cache: proxyCache,
};

/**
 * The response side of uwsgi and SCGI (ngx_http_{uwsgi,scgi}_process_status_line
 * and process_header): the answer starts with an HTTP status line or
 * directly with CGI header fields (`Status:`, else 302 with a Location, else
 * 200), at most `*_buffer_size` bytes; the body is the rest, with its
 * Content-Length when the backend sends one, else until the backend closes.
 */
import { copyHeaders } from '../proxy/headers-out.ts';
import type { UpstreamHead, UpstreamProtocol } from '../../upstream/protocol.ts';
import { parseCgiHead } from '../../upstream/response-head.ts';
import type { CgiDerived, CgiLoc } from './conf.ts';

export const plainCgiProtocol: UpstreamProtocol<CgiLoc, CgiDerived> = {
  processHeader(u, b): UpstreamHead | undefined {
    const limit = u.conf.bufferSize;
    const head = parseCgiHead(b.toString('latin1', 0, Math.min(b.length, limit)), true, (m) => u.log('warn', m));
    if (head === undefined) {
      if (b.length >= limit) {
        u.log('error', 'upstream sent too big header');
        u.invalidHeader(b.length - limit);
      }
      return undefined;
    }
    if ('error' in head) {
      u.log('error', head.error);
      u.invalidHeader();
      return undefined;
    }
    head.connectionClose = true;
    return head;
  },
  copyHeaders: (u, head) => copyHeaders(u.r, head, u.d, u.conf.ignoreHeaders),
};

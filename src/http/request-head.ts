/**
 * A request head as read from a connection (nginx's view of it after
 * ngx_http_process_request_line/headers): method, target, version, host and
 * port, the server chosen, the headers that steer keepalive, the length as
 * received, and the status nginx answers when it refused the head.
 * src/http/head-reader.ts fills it.
 */
import type { ServerConf } from './http-conf.ts';
import type { ServerMatch } from './virtual-server.ts';

/** `Connection:` of the request (nginx's headers_in.connection_type). */
export const CONN_NONE = 0;
export const CONN_CLOSE = 1;
export const CONN_KEEPALIVE = 2;

/** User-Agent families nginx notes (keepalive_disable, msie_padding, msie_refresh). */
export const UA_MSIE = 1;
export const UA_MSIE6 = 2;
export const UA_SAFARI = 4;
export const UA_CHROME = 8;

/** A request head as read: what the request, variables and logs need. */
export class RequestHead {
  method = '';
  /** The request line as sent, without its line end ($request). */
  line = '';
  /** The target from its path on (`$request_uri`; `/` for `http://host`). */
  target = '';
  complexUri = false;
  emptyPath = false;
  /** The decoded path ($uri as read; empty when the target was refused) and the arguments. */
  uri = '';
  args = '';
  /** nginx's r->http_version: major * 1000 + minor (9 for HTTP/0.9). */
  version = 0;
  /** The protocol as sent (`HTTP/1.1`), '' for HTTP/0.9. */
  protocol = '';
  /** Host from the request line or Host header, validated and lowercased ('' when none). */
  host = '';
  /** Port given with that host ($request_port), '' when none. */
  port = '';
  /** The Host header's value as sent. */
  hostHeader: string | undefined;
  server: ServerConf;
  match: ServerMatch | undefined;
  /** The request was already read when the previous one on the connection finished ($pipe). */
  pipelined = false;
  connection = CONN_NONE;
  /** The first User-Agent value (nginx looks only at that one). */
  userAgentValue: string | undefined;
  private uaFlags = -1;
  contentLength = -1;
  chunked = false;
  /** Bytes of the head as received ($request_length before the body). */
  length = 0;
  /** The header lines kept, as node's rawHeaders: name, value, name, value, ... */
  rawHeaders: string[] = [];
  /** A status nginx answers instead of processing (400, 414, 494, 501, 405, 505), 0 when fine. */
  error = 0;
  /** The info-level line nginx logs with that error, and nginx's "while ..." for it. */
  errorLog = '';
  errorAction = 'reading client request line';
  /** Invalid header lines skipped (nginx logs each at info level). */
  dropped: string[] | undefined;
  /** Offset of the head's end in the buffer read. */
  end = 0;
  /** The head's bytes as received, request line to the empty line (HTTP/1, when HttpMainConf.keepRawHeads). */
  raw: string | undefined;

  constructor(server: ServerConf) {
    this.server = server;
  }

  /** The browser families of User-Agent nginx notes (UA_*), worked out when first asked. */
  get userAgent(): number {
    if (this.uaFlags < 0) this.uaFlags = this.userAgentValue === undefined ? 0 : userAgentFlags(this.userAgentValue);
    return this.uaFlags;
  }
}


/** ngx_http_process_user_agent's browser flags. */
function userAgentFlags(ua: string): number {
  let flags = 0;
  const msie = ua.indexOf('MSIE ');
  if (msie >= 0 && msie + 7 < ua.length) {
    flags |= UA_MSIE;
    if (ua[msie + 6] === '.') {
      const major = ua[msie + 5];
      if (major === '4' || major === '5' || (major === '6' && !ua.includes('SV1', msie + 8))) flags |= UA_MSIE6;
    }
  }
  if (ua.includes('Opera')) return 0; // Opera: neither MSIE nor Safari
  if (flags & UA_MSIE || ua.includes('Gecko/')) return flags;
  if (ua.includes('Chrome/')) return UA_CHROME;
  if (ua.includes('Safari/') && ua.includes('Mac OS X')) return UA_SAFARI;
  return flags;
}


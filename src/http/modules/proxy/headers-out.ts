/**
 * Turning the upstream's response head into the client's
 * (ngx_http_upstream_process_headers and the copy handlers of
 * ngx_http_upstream_headers_in): hidden fields dropped, Content-Type,
 * Content-Length and Last-Modified taken over by the response itself,
 * Location and Refresh passed through proxy_redirect, hop-by-hop fields
 * (Connection, Keep-Alive, Transfer-Encoding) never passed, every other
 * field copied in order (Last-Modified too, where nginx keeps it).
 */
import type { HttpRequest } from '../../request.ts';
import type { DerivedConf } from './conf.ts';
import { rewriteCookie } from './cookies.ts';
import { rewriteRedirect } from './redirect.ts';
import type { UpstreamHead } from '../../upstream/protocol.ts';
import { IGN } from '../../upstream/conf.ts';
import { overrideCharset } from '../charset/index.ts';

/** Fields the upstream module never copies to the client. */
const NOT_COPIED = new Set(['content-length', 'connection', 'keep-alive', 'transfer-encoding']);

/** What the copy reads: the hidden names, and the proxy's rewrites (other protocols have none). */
export type CopyConf = Pick<DerivedConf, 'hidden'> & Partial<Pick<DerivedConf, 'redirects' | 'cookies'>> & {
  /** Server and Date are not hidden by default (fastcgi…): nginx's own are replaced only by ones the upstream sent. */
  passesServerDate?: boolean;
};

/** Copies the upstream head to `r`'s response; `ignore` is *_ignore_headers' bits. */
export function copyHeaders(r: HttpRequest, head: UpstreamHead, d: CopyConf, ignore: number): void {
  const { names, lnames, values } = head.headers;
  const hidden = d.hidden;
  for (let i = 0; i < names.length; i++) {
    const lname = lnames[i];
    // ngx_http_upstream_process_charset: read whether or not the field is passed on
    if (lname === 'x-accel-charset' && !(ignore & IGN['X-Accel-Charset'])) overrideCharset(r, values[i]);
    if (hidden.has(lname) || NOT_COPIED.has(lname)) continue;
    const value = values[i];
    switch (lname) {
      case 'content-type':
        // nginx writes Content-Type only when it has a value
        r.contentType = value === '' ? undefined : value;
        continue;
      case 'location':
        if (d.redirects) {
          const v = rewriteRedirect(r, d.redirects, value, 0);
          if (v !== undefined) {
            // a rewritten relative Location becomes nginx's own (made absolute by the header filter)
            if (v.startsWith('/')) r.location = v;
            else r.addHeader(names[i], v);
            continue;
          }
        }
        break;
      case 'set-cookie':
        if (d.cookies) {
          const v = rewriteCookie(r, d.cookies, value);
          if (v !== undefined) { r.addHeader(names[i], v); continue; }
        }
        break;
      case 'refresh':
        if (d.redirects) {
          const at = value.toLowerCase().indexOf('url=');
          if (at >= 0) {
            const v = rewriteRedirect(r, d.redirects, value, at + 4);
            if (v !== undefined) { r.addHeader(names[i], v); continue; }
          }
        }
        break;
    }
    r.addHeader(names[i], value);
  }
  r.status = head.status;
  r.contentLength = head.contentLength >= 0 && !head.chunked ? head.contentLength : undefined;
  // a passed Server or Date replaces nginx's own, even when the upstream sent none
  const sent = d.passesServerDate === true;
  if (!hidden.has('server') && (!sent || lnames.includes('server'))) r.ownServer = true;
  if (!hidden.has('date') && (!sent || lnames.includes('date'))) r.ownDate = true;
  const line = head.statusLine;
  r.statusReason = line.length > 4 ? line.slice(4) : line ? '' : undefined;
}

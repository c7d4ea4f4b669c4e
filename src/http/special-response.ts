/**
 * nginx's built-in response pages (ngx_http_special_response.c), byte for
 * byte, and its status line reason phrases (ngx_http_header_filter_module.c),
 * as in nginx 1.22.
 */

import { NGINX_VERSION, serverSignature } from '../core/version.ts';

// the versions live in the core (stream reports $nginx_version too); the http engine's files import them from here
export { NGINX_VERSION, serverSignature };

/**
 * Reason phrases nginx puts in the status lines it writes itself
 * (ngx_http_status_lines); any other status goes out as `HTTP/1.1 NNN `.
 */
export const REASONS: Record<number, string> = {
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 206: 'Partial Content',
  301: 'Moved Permanently', 302: 'Moved Temporarily', 303: 'See Other',
  304: 'Not Modified', 307: 'Temporary Redirect', 308: 'Permanent Redirect',
  400: 'Bad Request', 401: 'Unauthorized', 402: 'Payment Required', 403: 'Forbidden',
  404: 'Not Found', 405: 'Not Allowed', 406: 'Not Acceptable', 408: 'Request Time-out',
  409: 'Conflict', 410: 'Gone', 411: 'Length Required', 412: 'Precondition Failed',
  413: 'Request Entity Too Large', 414: 'Request-URI Too Large', 415: 'Unsupported Media Type',
  416: 'Requested Range Not Satisfiable', 421: 'Misdirected Request', 429: 'Too Many Requests',
  500: 'Internal Server Error', 501: 'Not Implemented', 502: 'Bad Gateway',
  503: 'Service Temporarily Unavailable', 504: 'Gateway Time-out', 505: 'HTTP Version Not Supported',
  507: 'Insufficient Storage',
};

/** Page titles where they differ from the status line (nginx's own codes 494-497 are sent as 400). */
const PAGE_TITLES: Record<number, string> = {
  302: '302 Found',
  401: '401 Authorization Required',
  494: '400 Request Header Or Cookie Too Large',
  495: '400 The SSL certificate error',
  496: '400 No required SSL certificate was sent',
  497: '400 The plain HTTP request was sent to HTTPS port',
  498: '404 Not Found',
};

/** Codes with a page (others: an empty body). */
const HAS_PAGE = new Set([
  301, 302, 303, 307, 308,
  400, 401, 402, 403, 404, 405, 406, 408, 409, 410, 411, 412, 413, 414, 415, 416, 421, 429,
  494, 495, 496, 497, 498,
  500, 501, 502, 503, 504, 505, 507,
]);

const MSIE_PADDING = '<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n'.repeat(6);

/** The status nginx sends for its internal codes (494-497 → 400). */
export function wireStatus(status: number): number {
  return status >= 494 && status <= 497 ? 400 : status;
}

export function statusLineReason(status: number): string {
  return REASONS[status] ?? '';
}

const pages = new Map<string, string>();

/**
 * Servers whose pages end their own way instead of `</body></html>`: the
 * text after the `<hr><center>gatehouse…</center>` line (the gateway's proxy
 * server ends them as APISIX's runtime does). Keyed by the server's configuration.
 */
export const pageTails = new WeakMap<object, string>();

/**
 * The HTML page nginx sends for `status`, or undefined when it sends none,
 * signed with Gatehouse's name where nginx signs with its own.
 * `padding`: msie_padding for an MSIE or Chrome client (4xx and 5xx only).
 */
export function specialPage(status: number, serverTokens: 'on' | 'off' | 'build', padding: boolean, tail?: string): string | undefined {
  if (!HAS_PAGE.has(status)) return undefined;
  const key = `${status}${serverTokens}${padding && status >= 400 ? 'p' : ''}${tail ?? ''}`;
  let page = pages.get(key);
  if (page !== undefined) return page;
  const title = PAGE_TITLES[status] ?? `${status} ${REASONS[status]}`;
  let body = `<html>\r\n<head><title>${title}</title></head>\r\n<body>\r\n`;
  if (status >= 494 && status <= 497) {
    body += `<center><h1>400 Bad Request</h1></center>\r\n<center>${title.slice(4)}</center>\r\n`;
  } else {
    body += `<center><h1>${title}</h1></center>\r\n`;
  }
  page = body + `<hr><center>${serverSignature(serverTokens)}</center>\r\n` + (tail ?? '</body>\r\n</html>\r\n');
  if (padding && status >= 400) page += MSIE_PADDING;
  pages.set(key, page);
  return page;
}

/** ngx_escape_uri's NGX_ESCAPE_REFRESH set: what a Refresh URL escapes. */
function escapeRefresh(uri: string): string {
  let out = '';
  for (let i = 0; i < uri.length; i++) {
    const c = uri.charCodeAt(i) & 0xff;
    out += c <= 0x20 || c >= 0x7f || c === 0x22 || c === 0x27
      ? '%' + c.toString(16).toUpperCase().padStart(2, '0') : uri[i];
  }
  return out;
}

/** The page `msie_refresh` sends MSIE instead of a 301/302 (ngx_http_send_refresh). */
export function refreshPage(location: string): string {
  return `<html><head><meta http-equiv="Refresh" content="0; URL=${escapeRefresh(location)}"></head><body></body></html>\r\n`;
}

/** Error statuses after which nginx closes the connection instead of keeping it alive. */
export function closesConnection(status: number): boolean {
  return status === 400 || status === 413 || status === 414 || (status >= 495 && status <= 497)
    || status === 500 || status === 501;
}

/**
 * nginx's built-in response pages (ngx_http_special_response.c), byte for
 * byte, and its status line reason phrases.
 */

export const NGINX_VERSION = '1.28.0';
export const NGINX_VER = `nginx/${NGINX_VERSION}`;

/** Reason phrases nginx sends in the status line (ngx_http_status_lines). */
export const REASONS: Record<number, string> = {
  100: 'Continue', 101: 'Switching Protocols', 102: 'Processing', 103: 'Early Hints',
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 206: 'Partial Content',
  300: 'Multiple Choices', 301: 'Moved Permanently', 302: 'Moved Temporarily', 303: 'See Other',
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

/** Titles of pages whose title differs from the status reason (nginx's 494-497 are sent as 400). */
const PAGE_TITLES: Record<number, string> = {
  401: '401 Authorization Required',
  302: '302 Found',
  494: '400 Request Header Or Cookie Too Large',
  495: '400 The SSL certificate error',
  496: '400 No required SSL certificate was sent',
  497: '400 The plain HTTP request was sent to HTTPS port',
};

const PAGE_DETAIL: Record<number, string> = {
  494: 'Request Header Or Cookie Too Large',
  495: 'The SSL certificate error',
  496: 'No required SSL certificate was sent',
  497: 'The plain HTTP request was sent to HTTPS port',
};

/** Codes nginx has a page for; others get an empty body. */
const HAS_PAGE = new Set([
  301, 302, 303, 307, 308,
  400, 401, 402, 403, 404, 405, 406, 408, 409, 410, 411, 412, 413, 414, 415, 416, 421, 429,
  494, 495, 496, 497,
  500, 501, 502, 503, 504, 505, 507,
]);

const MSIE_PADDING = '<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n'.repeat(6);

/** The status nginx actually sends for its internal codes (494-497 → 400). */
export function wireStatus(status: number): number {
  return status >= 494 && status <= 497 ? 400 : status;
}

export function statusLineReason(status: number): string {
  return REASONS[status] ?? '';
}

/** The HTML page nginx sends for `status`, or undefined when it sends none. */
export function specialPage(status: number, serverTokens: 'on' | 'off' | 'build', msiePadding: boolean): string | undefined {
  if (!HAS_PAGE.has(status)) return undefined;
  const title = PAGE_TITLES[status] ?? `${status} ${REASONS[status]}`;
  const h1 = status >= 494 && status <= 497 ? '400 Bad Request' : title;
  const detail = PAGE_DETAIL[status] ? `<center>${PAGE_DETAIL[status]}</center>\r\n` : '';
  const tail = serverTokens === 'off'
    ? '<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n'
    : `<hr><center>${NGINX_VER}</center>\r\n</body>\r\n</html>\r\n`;
  const padding = msiePadding && status >= 400 ? MSIE_PADDING : '';
  return `<html>\r\n<head><title>${title}</title></head>\r\n<body>\r\n<center><h1>${h1}</h1></center>\r\n${detail}${tail}${padding}`;
}

/** Statuses after which nginx closes the connection instead of keeping it alive. */
export function closesConnection(status: number): boolean {
  return status === 400 || status === 413 || status === 414 || (status >= 494 && status <= 497)
    || status === 500 || status === 501;
}

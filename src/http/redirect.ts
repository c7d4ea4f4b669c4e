/**
 * `Location` values as nginx sends them. A relative redirect (`/path`) is
 * made absolute when the head is sent (ngx_http_header_filter), following
 * `absolute_redirect`, `server_name_in_redirect` and `port_in_redirect` of
 * the location that answers; modules only set `r.location`.
 */
import { coreLoc } from './core/settings.ts';
import type { HttpRequest } from './request.ts';
import { escapeUri } from './uri.ts';

/** The `Location` value to send for `value` (absolute when it starts with `/` and absolute_redirect is on). */
export function absoluteLocation(r: HttpRequest, value: string): string {
  if (value.charCodeAt(0) !== 0x2f /* / */) return value;
  const core = r.level.get(coreLoc);
  if (core.absoluteRedirect === false) return value;
  const ssl = r.conn.tls !== undefined;
  let host: string;
  if (core.serverNameInRedirect) host = r.server.primaryName;
  else if (r.host) host = r.host;
  // nginx prints the local address without brackets here, even for IPv6
  else host = r.conn.localAddress;
  let port = r.conn.localPort;
  if (core.portInRedirect === false || port === (ssl ? 443 : 80)) port = 0;
  return `${ssl ? 'https' : 'http'}://${host}${port ? `:${port}` : ''}${value}`;
}

/**
 * The `/dir` → `/dir/` redirect (static module on a directory, nginx's
 * ngx_http_static_handler): sets `Location` to the escaped URI with a slash
 * and the arguments, and returns 301 for the caller to finalize with.
 */
export function directoryRedirect(r: HttpRequest): number {
  r.location = escapeUri(r.uri) + '/' + (r.args ? `?${r.args}` : '');
  return 301;
}

/**
 * `*_bind` (nginx's ngx_http_upstream_bind_set_slot): the local address a
 * try connects from.
 */
import net from 'node:net';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import type { ComplexValue } from '../../core/variables.ts';

/**
 * The `*_bind` value as nginx's ngx_parse_addr_port reads it: an address
 * with an optional port (`[::1]:80`); empty means no bind, anything else is
 * logged and ignored.
 */
export function localBinding(r: HttpRequest, bind: ComplexValue): { localAddress?: string; localPort?: number } {
  const v = bind.evaluate(r);
  if (!v) return {};
  const m = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(v) ?? /^([^:]+)(?::(\d{1,5}))?$/.exec(v) ?? [v, v];
  const port = m[2] === undefined ? undefined : Number(m[2]);
  if (!net.isIP(m[1]) || (port !== undefined && (port < 1 || port > 65535))) {
    requestLog(r).error(`invalid local address "${v}"`);
    return {};
  }
  return { localAddress: m[1], localPort: port };
}

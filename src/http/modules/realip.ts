/**
 * ngx_http_realip_module: `set_real_ip_from`, `real_ip_header`,
 * `real_ip_recursive`, `$realip_remote_addr`, `$realip_remote_port`.
 *
 * When the client is a trusted address, the address in X-Real-IP (the
 * default), X-Forwarded-For, any other header, or the PROXY protocol header
 * becomes the request's client address (`$remote_addr`, allow/deny, limits,
 * log lines) until the request ends — nginx swaps the connection's address
 * for the request; here the request carries it (r.realAddress), so HTTP/2
 * streams of one connection stay apart. It runs in POST_READ with the
 * server's settings and again in PREACCESS with the location's, once per
 * request (internal redirects and subrequests keep what was found).
 */
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { flagArg } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import { resolveHostSync } from '../../upstream/address.ts';
import { DECLINED } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import { addTrustedFrom, addrText, clientAddrOf, forwardedAddr, FWD_DECLINED } from '../../core/inet.ts';
import type { Rule } from '../../core/inet.ts';
import type { HttpRequest } from '../request.ts';
import { headerValues } from './geo.ts';

interface RealipConf {
  /** Trusted addresses (`set_real_ip_from`); a level with its own list inherits none. */
  from?: Rule[];
  /** `X-Real-IP`, `X-Forwarded-For`, `proxy_protocol`, or another header's lowercase name. */
  header?: string;
  recursive?: boolean;
}

const REALIP_DEFAULTS = { header: 'X-Real-IP', recursive: false } satisfies RealipConf;

const realipSlot = defineSlot<RealipConf, typeof REALIP_DEFAULTS>('realip', () => ({}), (parent, child) => {
  child.from ??= parent.from;
  child.header ??= parent.header;
  child.recursive ??= parent.recursive;
}, REALIP_DEFAULTS);

/** Whether realip already ran for this request (or the request it is a subrequest of). */
function applied(r: HttpRequest): boolean {
  for (let q: HttpRequest | undefined = r; q; q = q.parent) if (q.realAddress) return true;
  return false;
}

/** ngx_http_realip_handler (POST_READ and PREACCESS). */
function realipHandler(r: HttpRequest): number {
  const conf = r.level.get(realipSlot);
  if (!conf.from || applied(r)) return DECLINED;
  const header = conf.header;
  let values: string[];
  if (header === 'X-Forwarded-For') {
    values = headerValues(r, 'x-forwarded-for');
  } else if (header === 'proxy_protocol') {
    const pp = r.conn.proxyProtocol;
    values = pp ? [pp.srcAddr] : [];
  } else {
    // the first header of the name
    const first = headerValues(r, header === 'X-Real-IP' ? 'x-real-ip' : header)[0];
    values = first === undefined ? [] : [first];
  }
  if (values.length === 0) return DECLINED;
  const client = clientAddrOf(r.conn.remoteAddress, r.conn.remotePort);
  if (forwardedAddr(client, values, conf.from, conf.recursive) === FWD_DECLINED) return DECLINED;
  if (header === 'proxy_protocol') client.port = r.conn.proxyProtocol!.srcPort;
  r.realAddress = { text: addrText(client.addr!), port: client.port };
  return DECLINED;
}

function setRealIpFrom(cf: ConfContext, node: ConfNode): undefined {
  const conf = cf.get(realipSlot);
  if (!Object.hasOwn(conf, 'from') || conf.from === undefined) conf.from = [];
  addTrustedFrom(cf, node.args[0], conf.from, resolveHostSync);
  return undefined;
}

/** real_ip_header's value: these three are matched as written; any other name is a header, caseless. */
function headerName(_cf: ConfContext, value: string): string {
  return value === 'X-Real-IP' || value === 'X-Forwarded-For' || value === 'proxy_protocol' ? value : value.toLowerCase();
}

export const realipModule: HttpModule = {
  name: 'ngx_http_realip_module',
  directives: [
    { name: 'set_real_ip_from', contexts: HTTP_ANY, args: 1, handler: setRealIpFrom },
    { name: 'real_ip_header', contexts: HTTP_ANY, args: 1, handler: setting(realipSlot, 'header', headerName) },
    { name: 'real_ip_recursive', contexts: Ctx.HTTP | Ctx.SERVER | Ctx.LOCATION, args: 'flag', handler: setting(realipSlot, 'recursive', flagArg) },
  ],
  variables: [
    // the connection's own address and port, whatever realip found
    { name: 'realip_remote_addr', get: (r) => r.conn.remoteAddress },
    { name: 'realip_remote_port', get: (r) => (r.conn.remotePort ? String(r.conn.remotePort) : '') },
  ],
  postconfiguration(http) {
    // after the TLS check (100) in post_read; first in preaccess, before limit_req (200) and limit_conn (300):
    // nginx registers realip after the limits and runs a phase's handlers last-registered first
    http.addPhaseHandler('POST_READ', 200, realipHandler);
    http.addPhaseHandler('PREACCESS', 100, realipHandler);
  },
};

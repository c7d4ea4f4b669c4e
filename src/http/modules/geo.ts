/**
 * ngx_http_geo_module: `geo [$address] $variable { ... }` — a value by the
 * client's address (or the address in a variable). The table (networks,
 * `ranges`, `default`, `delete`, `include`) is the core's geo table, shared
 * with the stream geo module; what http adds is `proxy`: trusted addresses
 * whose X-Forwarded-For is believed (`proxy_recursive` walks the list back).
 */
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { geoValue, readGeoBlock } from '../../core/geo-table.ts';
import type { GeoEntryHook } from '../../core/geo-table.ts';
import { clientAddrOf, forwardedAddr, parseAddr } from '../../core/inet.ts';
import type { Cidr, ClientAddr } from '../../core/inet.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';

interface GeoProxies {
  proxies: Cidr[] | undefined;
  recursive: boolean;
}

/** The address to look up, or undefined where nginx's ngx_http_geo_addr fails. */
function geoAddress(r: HttpRequest, sourceIndex: number, p: GeoProxies): ClientAddr | undefined {
  let client: ClientAddr;
  if (sourceIndex < 0) {
    client = clientAddrOf(r.remoteAddress, r.remotePort);
  } else {
    const text = r.main.variables.value(r, sourceIndex);
    const addr = text === undefined ? undefined : parseAddr(text);
    if (!addr) return undefined;
    client = { addr, port: 0 };
  }
  if (p.proxies) {
    const xff = headerValues(r, 'x-forwarded-for');
    if (xff.length) forwardedAddr(client, xff, p.proxies, p.recursive);
  }
  return client;
}

/** Every value of a request header, in order. */
export function headerValues(r: HttpRequest, lowerName: string): string[] {
  const raw = r.headersIn;
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].length === lowerName.length && raw[i].toLowerCase() === lowerName) out.push(raw[i + 1]);
  }
  return out;
}

function geoBlock(cf: ConfContext, node: ConfNode): void {
  const vars = httpMainOf(cf).variables;
  const p: GeoProxies = { proxies: undefined, recursive: false };
  const hook: GeoEntryHook = (value, reader) => {
    if (value.length === 1 && value[0] === 'proxy_recursive') p.recursive = true;
    else if (value.length === 2 && value[0] === 'proxy') (p.proxies ??= []).push(reader.network(value[1]));
    else return false;
    return true;
  };
  const { name, sourceIndex, geo, volatile } = readGeoBlock(cf, node, vars, hook);
  vars.define({ name, get: (r) => geoValue(geo, geoAddress(r, sourceIndex, p)?.addr), changeable: true, noCache: volatile });
}

export const geoModule: HttpModule = {
  name: 'ngx_http_geo_module',
  directives: [
    { name: 'geo', contexts: Ctx.HTTP, args: [1, 2], block: true, handler: geoBlock },
  ],
};

/**
 * real-ip (apisix/plugins/real-ip.lua): the client address (`$remote_addr`,
 * `$remote_port`, X-Real-IP and X-Forwarded-For upstream, the plugins after
 * it) taken from the variable `source` names, when the connection comes
 * from one of `trusted_addresses` (or always without them). For
 * `http_x_forwarded_for` the last address of the last header is taken, or
 * with `recursive` the last one not trusted. An address that is not an IP
 * (with an optional port) leaves the client as it was.
 */
import net from 'node:net';
import { cidrMatch, clientAddrOf, parseCidr } from '../../core/inet.ts';
import type { Cidr } from '../../core/inet.ts';
import type { PluginContext } from './phase-api.ts';
import type { GatewayPlugin } from './registry.ts';

interface RealIpConf { source: string; trusted_addresses?: string[]; recursive: boolean }

const nets = new WeakMap<string[], Cidr[]>();

function trusted(conf: RealIpConf, addr: string): boolean {
  const list = conf.trusted_addresses!;
  let n = nets.get(list);
  if (!n) nets.set(list, (n = list.map((x) => parseCidr(x)).filter((c): c is Cidr => c !== undefined)));
  return cidrMatch(clientAddrOf(addr, 0), n);
}

function sourceAddress(conf: RealIpConf, ctx: PluginContext): string | undefined {
  if (conf.source !== 'http_x_forwarded_for') return ctx.variable(conf.source);
  const all = ctx.variable('http_x_forwarded_for');
  if (all === undefined) return undefined;
  const list = all.split(/,\s*/);
  if (conf.recursive && conf.trusted_addresses) {
    for (let i = list.length - 1; i >= 1; i--) if (!trusted(conf, list[i])) return list[i];
    return list[0];
  }
  return list[list.length - 1];
}

/** `ip`, `ip:port`, `[v6]`, `[v6]:port`, or a bare v6. */
function splitAddress(text: string): { ip: string; port: number | undefined } | undefined {
  let ip = text;
  let port: number | undefined;
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(text) ?? (net.isIPv6(text) ? null : /^([^:]+):(\d+)$/.exec(text));
  if (m) {
    ip = m[1];
    port = m[2] === undefined ? undefined : Number(m[2]);
  }
  if (!net.isIP(ip)) return undefined;
  if (port !== undefined && (port < 1 || port > 65535)) return undefined;
  return { ip, port };
}

export const realIp: GatewayPlugin<RealIpConf> = {
  name: 'real-ip', version: 0.1, priority: 23000,
  schema: {
    type: 'object',
    properties: {
      trusted_addresses: { type: 'array', minItems: 1, items: { type: 'string' } },
      source: { type: 'string', minLength: 1 },
      recursive: { type: 'boolean', default: false },
    },
    required: ['source'],
  },
  rewrite(conf, ctx) {
    if (conf.trusted_addresses && !trusted(conf, ctx.variable('remote_addr') ?? '')) return undefined;
    const text = sourceAddress(conf, ctx);
    const addr = text === undefined ? undefined : splitAddress(text.trim());
    if (addr) ctx.setClientAddress(addr.ip, addr.port);
    return undefined;
  },
};

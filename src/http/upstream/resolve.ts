/**
 * Where a proxied request goes (ngx_http_upstream_init_request): the
 * group of a static target; for a target with variables, an `upstream {}`
 * (or proxy_pass-made group) of that name and port, else the address itself
 * when it is an IP or unix socket, else the name resolved with `resolver`.
 */
import net from 'node:net';
import { parseTime } from '../../conf/values.ts';
import { addressName } from '../../upstream/address.ts';
import { resolvedPeerList } from '../../upstream/group.ts';
import type { UpstreamGroup } from '../../upstream/group.ts';
import type { PeerList } from '../../upstream/peer.ts';
import { ResolveError, resolverForArgs } from '../../upstream/resolver.ts';
import type { Resolver } from '../../upstream/resolver.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { coreLoc, CORE_LOC_DEFAULTS } from '../core/settings.ts';
import { findUpstream } from './module.ts';
import type { Placement } from './peer-choice.ts';

export function resolverFor(r: HttpRequest): Resolver | undefined {
  const args = r.level.get(coreLoc).resolverArgs;
  if (!args || args.length === 0) return undefined;
  return resolverForArgs(args, parseTime, CORE_LOC_DEFAULTS.resolverTimeout);
}

/** Where the protocol's URL points (nginx's u->resolved, or the group of a URL without variables). */
export interface UpstreamTarget {
  /** The group a URL without variables named (made by upstreamAdd at configuration time). */
  group?: UpstreamGroup;
  /** For a URL with variables: the host (name, IP or unix path) and port it evaluated to. */
  connectHost?: string;
  connectPort?: number;
  /** The URL named no port (then it may name an `upstream {}` block). */
  noPort?: boolean;
  unix?: boolean;
  /** The host[:port] as written: the name of a one-address peer list. */
  hostHeader: string;
}

/** Where the request goes: at once for a group or an address, a promise when a name must be resolved. */
export function resolveTarget(r: HttpRequest, t: UpstreamTarget): Placement | number | Promise<Placement | number> {
  if (t.group) return { group: t.group, peers: t.group.primary };
  const host = t.connectHost!;
  const group = findUpstream(r.main, host, t.noPort ? undefined : t.connectPort);
  if (group) return { group, peers: group.primary };
  if (t.unix) return { group: undefined, peers: resolvedPeerList([{ name: 'unix:' + host, path: host }], 'unix:' + host) };
  const port = t.connectPort!;
  if (net.isIP(host)) {
    return { group: undefined, peers: resolvedPeerList([{ name: addressName(host, port), host, port }], t.hostHeader) };
  }
  const resolver = resolverFor(r);
  if (!resolver) {
    requestLog(r).error(`no resolver defined to resolve ${host}`);
    return 502;
  }
  const timeout = r.level.get(coreLoc).resolverTimeout;
  return resolveName(r, resolver.resolve(host, timeout), host, port);
}

async function resolveName(r: HttpRequest, lookup: Promise<string[]>, host: string, port: number): Promise<Placement | number> {
  try {
    const ips = await lookup;
    return {
      group: undefined,
      peers: resolvedPeerList(ips.map((ip) => ({ name: addressName(ip, port), host: ip, port })), host),
    };
  } catch (err) {
    const e = err as ResolveError;
    requestLog(r).error(`${host} could not be resolved (${e.code}: ${e.message})`);
    return 502;
  }
}

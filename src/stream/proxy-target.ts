/**
 * Where a proxied session connects (the start of ngx_stream_proxy_handler,
 * for TCP and UDP alike): the server's `proxy_pass` group, or a value
 * computed per session naming a group, an address or a host to resolve;
 * the group's balancer (hash, least_conn, random; round robin otherwise)
 * makes the picker. Also the local address `proxy_bind` gives.
 */
import net from 'node:net';
import { LogLevel } from '../core/error-log.ts';
import type { ComplexValue } from '../core/variables.ts';
import { addressName, parseUrl } from '../upstream/address.ts';
import { createPicker } from '../upstream/balancers.ts';
import { resolvedPeerList } from '../upstream/group.ts';
import type { UpstreamGroup } from '../upstream/group.ts';
import type { PeerList } from '../upstream/peer.ts';
import { ResolveError } from '../upstream/resolver.ts';
import type { Resolver } from '../upstream/resolver.ts';
import { RoundRobinPicker } from '../upstream/round-robin.ts';
import { Status } from './conf.ts';
import { parseLocalAddress } from './listen.ts';
import type { LocalAddress } from './listen.ts';
import type { StreamSession } from './session.ts';

/** Where to connect: a configured group, or a target computed from variables. */
export type ProxyTarget =
  | { group: UpstreamGroup }
  /** Peers chosen by a module for this session (the gateway's stream routes), with its own timeouts (ms) if any. */
  | { picker: RoundRobinPicker; name: string; connectTimeout?: number; timeout?: number }
  | { value: ComplexValue<StreamSession>; find(host: string, port: number | undefined): UpstreamGroup | undefined; resolver: Resolver | undefined };

/** What a session's proxy hears back: the peers to try (and the name logged when none is left), or a status to end with. */
export interface PeersUser {
  readonly done: boolean;
  usePicker(picker: RoundRobinPicker, name: string): void;
  fail(status: number): void;
}

/**
 * Finds the peers of `target` for session `s`, now or once a name is
 * resolved; the picker allows at most `maxTries` tries (proxy_next_upstream_tries, 0: no limit).
 */
export function choosePeers(s: StreamSession, target: ProxyTarget, maxTries: number, user: PeersUser): void {
  const ready: PeersUser = {
    get done() { return user.done; },
    usePicker(picker, name) {
      if (maxTries && picker.tries > maxTries) picker.tries = maxTries;
      user.usePicker(picker, name);
    },
    fail: (status) => user.fail(status),
  };
  pickFor(s, target, ready);
}

function pickFor(s: StreamSession, target: ProxyTarget, user: PeersUser): void {
  if ('group' in target) return useGroup(s, target.group, user);
  if ('picker' in target) return user.usePicker(target.picker, target.name);
  const text = target.value.evaluate(s);
  const u = parseUrl(text, { uriPart: false });
  if (typeof u === 'string') {
    s.error(LogLevel.error, `${u} in upstream "${text}"`);
    return user.fail(Status.INTERNAL_SERVER_ERROR);
  }
  const group = target.find(u.host, u.port);
  if (group) return useGroup(s, group, user);
  const noPort = () => {
    s.error(LogLevel.error, `no port in upstream "${u.host}"`);
    user.fail(Status.INTERNAL_SERVER_ERROR);
  };
  if (u.unix || net.isIP(u.host)) {
    if (u.port === undefined && !u.unix) return noPort();
    const addr = u.unix ? { name: 'unix:' + u.host, path: u.host } : { name: addressName(u.host, u.port!), host: u.host, port: u.port! };
    return usePeers(resolvedPeerList([addr], text), u.host, user);
  }
  if (u.port === undefined) return noPort();
  if (!target.resolver) {
    s.error(LogLevel.error, `no resolver defined to resolve ${u.host}`);
    return user.fail(Status.INTERNAL_SERVER_ERROR);
  }
  target.resolver.resolve(u.host).then((ips) => {
    if (user.done) return;
    const port = u.port!;
    usePeers(resolvedPeerList(ips.map((ip) => ({ name: addressName(ip, port), host: ip, port })), u.host), u.host, user);
  }, (err: unknown) => {
    if (user.done) return;
    const e = err instanceof ResolveError ? err : new ResolveError(2, 'Server failure');
    s.error(LogLevel.error, `${u.host} could not be resolved (${e.code}: ${e.message})`);
    user.fail(Status.BAD_GATEWAY);
  });
}

/** A group's peers, picked by its balancer (hash, least_conn, random; round robin otherwise). */
function useGroup(s: StreamSession, g: UpstreamGroup, user: PeersUser): void {
  const b = g.balancer;
  if (b.kind === 'round_robin') return usePeers(g.primary, g.name, user);
  const key = b.kind === 'hash' ? (g.balanceKey as ComplexValue<StreamSession>).evaluate(s) : '';
  user.usePicker(createPicker(b, g.primary, { clientAddress: s.remoteAddress, key }, g.ring), g.name);
}

function usePeers(list: PeerList, name: string, user: PeersUser): void {
  user.usePicker(new RoundRobinPicker(list), name);
}

/** ngx_stream_proxy_set_local: an address that does not parse is logged and not used. */
export function localAddress(s: StreamSession, bind: LocalAddress | ComplexValue<StreamSession> | undefined): LocalAddress | undefined {
  if (!bind || 'address' in bind) return bind;
  const text = bind.evaluate(s);
  if (text === '') return undefined;
  const addr = parseLocalAddress(text);
  if (!addr) s.error(LogLevel.error, `invalid local address "${text}"`);
  return addr;
}

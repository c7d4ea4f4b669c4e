/**
 * ngx_stream_upstream_module: `upstream {}` groups of the stream block with
 * their `server` lines (weight, max_conns, max_fails, fail_timeout, backup,
 * down), the groups proxy_pass creates implicitly, and the `$upstream_*`
 * variables read from the session's record of tries. Groups, peers and the
 * round robin are the protocol-independent ones of src/upstream, shared
 * with http proxying.
 */
import { defineSlot, Level } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { parseServerParams } from '../../upstream/server-params.ts';
import { parseUrl, resolveAddresses } from '../../upstream/address.ts';
import type { ParsedUrl } from '../../upstream/address.ts';
import { UpstreamGroup } from '../../upstream/group.ts';
import { readBalancer } from '../../upstream/block-directives.ts';
import { compileComplex } from '../../core/variables.ts';
import { streamMainOf } from '../conf.ts';
import type { StreamMainConf, StreamModule, StreamVariable } from '../conf.ts';
import type { StreamSession, UpstreamTry } from '../session.ts';
import { msText } from './core.ts';

/** Every upstream group of the stream block, explicit and implicit (nginx's umcf->upstreams). */
export const streamUpstreams = defineSlot<{ groups: UpstreamGroup[] }>('stream_upstream_main', () => ({ groups: [] }));

/**
 * Finds or creates a group as ngx_stream_upstream_add does; returns its
 * index in the block's list, which stays valid when an `upstream {}` block
 * read later takes the place of an implicit group of the same name.
 */
export function streamUpstreamAdd(cf: ConfContext, u: ParsedUrl, explicit: boolean): number {
  const groups = cf.at('stream', streamUpstreams).groups;
  const file = cf.node?.file ?? '';
  const line = cf.node?.line ?? 0;
  for (let i = 0; i < groups.length; i++) {
    const g = groups[i];
    if (g.name.length !== u.host.length || g.name.toLowerCase() !== u.host.toLowerCase()) continue;
    if (explicit && g.explicit) throw cf.error(`duplicate upstream "${u.host}"`);
    if (g.explicit && u.port !== undefined) throw cf.error(`upstream "${u.host}" may not have port ${u.port}`);
    if (explicit && g.port !== undefined) throw new ConfError(`upstream "${u.host}" may not have port ${g.port} in ${g.file}:${g.line}`);
    if (g.port !== u.port) continue;
    if (explicit) groups[i] = new UpstreamGroup(u.host, undefined, true, false, file, line);
    return i;
  }
  groups.push(new UpstreamGroup(u.host, u.unix ? undefined : u.port, explicit, u.unix, file, line));
  return groups.length - 1;
}

/** A run-time proxy_pass target's group: same name, and the same port or both without one. */
export function findStreamUpstream(main: StreamMainConf, host: string, port: number | undefined): UpstreamGroup | undefined {
  for (const g of main.level.get(streamUpstreams).groups) {
    if (g.name.length === host.length && g.port === port && g.name.toLowerCase() === host.toLowerCase()) return g;
  }
  return undefined;
}

/** Builds every group's peers once the block is read (ngx_stream_upstream_init_round_robin). */
function initGroups(stream: StreamMainConf): void {
  for (const g of stream.level.get(streamUpstreams).groups) {
    g.attachZone('stream-upstream');
    if (g.explicit || g.servers.length) {
      if (!g.servers.some((s) => !s.backup)) throw new ConfError(`no servers in upstream "${g.name}" in ${g.file}:${g.line}`);
      g.init();
      continue;
    }
    if (!g.unix && g.port === undefined) throw new ConfError(`no port in upstream "${g.name}" in ${g.file}:${g.line}`);
    const addrs = resolveAddresses({ host: g.name, port: g.port, unix: g.unix, uri: '', hostPort: g.name }, 0);
    if (typeof addrs === 'string') throw new ConfError(`${addrs} in upstream "${g.name}" in ${g.file}:${g.line}`);
    // proxy_pass with an address makes one server that nginx leaves at weight 0 and max_fails 0;
    // a name's addresses get the defaults
    const literal = g.unix || addrs.length === 1 && addrs[0].host === g.name;
    g.servers.push({
      name: g.name, addrs, weight: literal ? 0 : 1, maxFails: literal ? 0 : 1, failTimeout: 10, maxConns: 0, backup: false, down: false,
    });
    g.init();
  }
}

/** The group whose `upstream {}` block is being read (for the balancer and zone modules). */
export function streamUpstreamGroupOf(cf: ConfContext): UpstreamGroup {
  return cf.data.streamUpstream as UpstreamGroup;
}

/** A balancing method's directive (ngx_stream_upstream_hash / least_conn / random): nginx warns when one replaces another. */
export function balancerDirective(kind: 'hash' | 'least_conn' | 'random'): Directive['handler'] {
  return (cf, node) => {
    const g = streamUpstreamGroupOf(cf);
    const key = kind === 'hash' ? compileComplex(cf, streamMainOf(cf).variables, node.args[0]) : undefined;
    if (g.balancer.kind !== 'round_robin') cf.warn('load balancing method redefined');
    g.balancer = readBalancer(cf, kind, node.args);
    g.balanceKey = key;
  };
}

function readUpstream(cf: ConfContext, node: ConfNode): void {
  const name = node.args[0];
  const index = streamUpstreamAdd(cf, { host: name, port: undefined, unix: false, uri: '', hostPort: name }, true);
  const group = cf.at('stream', streamUpstreams).groups[index];
  cf.block(node.children ?? [], Ctx.STREAM_UPSTREAM, new Level(cf.level), 'upstream', { streamUpstream: group });
  if (group.servers.length === 0) throw cf.error('no servers are inside upstream');
}

function readServer(cf: ConfContext, node: ConfNode): void {
  const group = cf.data.streamUpstream as UpstreamGroup;
  const a = node.args;
  const { weight, maxConns, maxFails, failTimeout, backup, down } = parseServerParams(cf, a.slice(1), group, false);
  const u = parseUrl(a[0], { uriPart: false });
  if (typeof u === 'string') throw cf.error(`${u} in upstream "${a[0]}"`);
  if (!u.unix && u.port === undefined) throw cf.error(`no port in upstream "${a[0]}"`);
  const addrs = resolveAddresses(u, 0);
  if (typeof addrs === 'string') throw cf.error(`${addrs} in upstream "${a[0]}"`);
  group.servers.push({ name: a[0], addrs, weight, maxFails, failTimeout, maxConns, backup, down });
}

const directives: Directive[] = [
  { name: 'upstream', contexts: Ctx.STREAM, args: 1, block: true, handler: readUpstream },
  { name: 'server', contexts: Ctx.STREAM_UPSTREAM, args: [1, Infinity], handler: readServer },
];

/** One value per try, joined with ", " (stream sessions have no internal redirects). */
function joinTries(s: StreamSession, item: (t: UpstreamTry) => string): string | undefined {
  const tries = s.upstreamStates;
  if (!tries || tries.length === 0) return undefined;
  let out = item(tries[0]);
  for (let i = 1; i < tries.length; i++) out += ', ' + item(tries[i]);
  return out;
}

const timeText = (ms: number) => (ms === -1 ? '-' : msText(ms));

const variables: StreamVariable[] = [
  { name: 'upstream_addr', noCache: true, get: (s) => joinTries(s, (t) => t.peer) },
  { name: 'upstream_bytes_sent', noCache: true, get: (s) => joinTries(s, (t) => String(t.bytesSent)) },
  { name: 'upstream_bytes_received', noCache: true, get: (s) => joinTries(s, (t) => String(t.bytesReceived)) },
  { name: 'upstream_connect_time', noCache: true, get: (s) => joinTries(s, (t) => timeText(t.connectTime)) },
  { name: 'upstream_first_byte_time', noCache: true, get: (s) => joinTries(s, (t) => timeText(t.firstByteTime)) },
  { name: 'upstream_session_time', noCache: true, get: (s) => joinTries(s, (t) => timeText(t.sessionTime)) },
];

export const streamUpstreamModule: StreamModule = {
  name: 'ngx_stream_upstream_module',
  directives,
  variables,
  postconfiguration: initGroups,
};

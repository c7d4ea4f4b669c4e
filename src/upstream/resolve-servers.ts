/**
 * `server name resolve` in an upstream with a zone (nginx 1.27.3+,
 * ngx_http_upstream_zone_module): the name is resolved while the worker
 * runs, and again once the answer's TTL (or the resolver's `valid=`) has
 * passed. Peers whose address went away are removed, new addresses become
 * peers with the server's parameters, the others keep their state. A lookup
 * error keeps the peers and is retried after max(resolver_timeout, 1 s);
 * "Host not found" (or an empty answer) leaves the server without peers.
 * Protocol-independent: HTTP and stream upstreams start it per worker.
 */
import net from 'node:net';
import { mainErrorLog } from '../core/error-log.ts';
import { addressName } from './address.ts';
import { Peer, PeerList } from './group.ts';
import type { ServerSpec, UpstreamGroup } from './group.ts';
import { ResolveError } from './resolver.ts';
import type { Resolver } from './resolver.ts';

const NXDOMAIN = 3;

/** Bytes of shared memory that keep a server's last answer (the addresses as text). */
export const ANSWER_MEMORY = 4096;

/**
 * The last answer is kept in shared memory (made by the master, kept over
 * reloads), so the workers of a new configuration start with it, as
 * nginx's preresolve copies the old peers. Slot 0: text length + 1.
 */
function rememberAnswer(mem: SharedArrayBuffer | undefined, ips: string[]): void {
  if (!mem) return;
  const text = Buffer.from(ips.join(' '), 'latin1').subarray(0, ANSWER_MEMORY - 4);
  Buffer.from(mem, 4).set(text);
  Atomics.store(new Int32Array(mem, 0, 1), 0, text.length + 1);
}

function rememberedAnswer(mem: SharedArrayBuffer | undefined): string[] | undefined {
  if (!mem) return undefined;
  const len = Atomics.load(new Int32Array(mem, 0, 1), 0) - 1;
  if (len < 0) return undefined;
  const text = Buffer.from(mem, 4, len).toString('latin1');
  return text ? text.split(' ') : [];
}

/** nginx's order for resolved addresses: IPv4 first, then by address. */
function compareAddresses(a: string, b: string): number {
  const fa = net.isIPv4(a) ? 4 : 6;
  const fb = net.isIPv4(b) ? 4 : 6;
  if (fa !== fb) return fa - fb;
  return addressBytes(a).compare(addressBytes(b));
}

function addressBytes(ip: string): Buffer {
  if (net.isIPv4(ip)) return Buffer.from(ip.split('.').map(Number));
  const b = Buffer.alloc(16);
  const [head, tail] = ip.split('::');
  const hp = head ? head.split(':') : [];
  const tp = tail !== undefined && tail !== '' ? tail.split(':') : [];
  hp.forEach((h, i) => b.writeUInt16BE(parseInt(h, 16), i * 2));
  tp.forEach((h, i) => b.writeUInt16BE(parseInt(h, 16), (8 - tp.length + i) * 2));
  return b;
}

/**
 * Replaces `spec`'s peers in the group with peers for `ips` (already
 * sorted): the server's other peers first, as before, then these.
 */
function applyAnswer(g: UpstreamGroup, owners: Map<Peer, ServerSpec>, spec: ServerSpec, ips: string[]): void {
  const port = spec.resolve!.port;
  const primary = g.primary.peers;
  const backup = g.primary.next?.peers ?? [];
  const list = spec.backup ? backup : primary;
  const kept: Peer[] = [];
  const old = new Map<string, Peer>();
  for (const p of list) {
    if (owners.get(p) === spec) old.set(p.name, p);
    else kept.push(p);
  }
  for (const ip of ips) {
    const name = addressName(ip, port);
    let p = old.get(name);
    if (!p) {
      // a peer made at run time keeps its state in this worker (not in the zone)
      p = new Peer({ name, host: ip, port }, spec);
      owners.set(p, spec);
    }
    kept.push(p);
  }
  const newPrimary = spec.backup ? primary : kept;
  const newBackup = spec.backup ? kept : backup;
  const lists = new PeerList(newPrimary, newPrimary.length === 1 && newBackup.length === 0);
  if (newBackup.length || g.primary.next) lists.next = new PeerList(newBackup, false);
  g.setPeers(lists);
}

/**
 * Starts re-resolving the group's `resolve` servers in this worker; returns
 * the function that stops it (at worker shutdown).
 */
export function watchResolvedServers(g: UpstreamGroup, resolver: Resolver, timeoutMs: number): () => void {
  const owners = new Map<Peer, ServerSpec>();
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  const later = (fn: () => void, ms: number) => {
    const t = setTimeout(() => { timers.delete(t); fn(); }, ms);
    t.unref();
    timers.add(t);
  };
  for (const spec of g.servers) {
    if (!spec.resolve) continue;
    const mem = spec.resolve.memory;
    const remembered = rememberedAnswer(mem);
    if (remembered) applyAnswer(g, owners, spec, remembered);
    const run = (): void => {
      resolver.resolveValid(spec.resolve!.host, timeoutMs).then((res) => {
        if (stopped) return;
        const ips = [...new Set(res.addrs)].sort(compareAddresses);
        rememberAnswer(mem, ips);
        applyAnswer(g, owners, spec, ips);
        later(run, Math.max(res.valid - Date.now(), 0) + 1000);
      }, (err: unknown) => {
        if (stopped) return;
        const e = err instanceof ResolveError ? err : new ResolveError(2, 'Server failure');
        mainErrorLog().error(`${spec.resolve!.host} could not be resolved (${e.code}: ${e.message})`);
        if (e.code === NXDOMAIN) {
          rememberAnswer(mem, []);
          applyAnswer(g, owners, spec, []);
          later(run, Math.max(e.valid - Date.now(), 0) + 1000);
          return;
        }
        later(run, Math.max(timeoutMs, 1000));
      });
    };
    later(run, 1);
  }
  return () => {
    stopped = true;
    for (const t of timers) clearTimeout(t);
    timers.clear();
  };
}

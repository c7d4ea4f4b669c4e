/**
 * `server name resolve [service=name]` in an upstream with a zone (nginx
 * 1.27.3+, ngx_http_upstream_zone_module): the name (or its SRV records) is
 * resolved while the worker runs, and again once the answer's TTL (or the
 * resolver's `valid=`) has passed. Peers whose address went away are
 * removed, new addresses become peers with the server's parameters (an SRV
 * record's port, its weight unless the server sets one, and a backup peer
 * beyond the lowest priority), the others keep their state. A lookup error
 * keeps the peers and is retried after max(resolver_timeout, 1 s); "Host
 * not found" (or an empty answer) leaves the server without peers.
 * Protocol-independent: HTTP and stream upstreams start it per worker.
 */
import net from 'node:net';
import { mainErrorLog } from '../core/error-log.ts';
import { addressName } from './address.ts';
import { dnsErrorText } from './dns-message.ts';
import type { UpstreamGroup } from './group.ts';
import { Peer, PeerList } from './peer.ts';
import type { ServerSpec } from './peer.ts';
import { ResolveError } from './resolver-conf.ts';
import { resolveService, ServiceError } from './resolver-srv.ts';
import type { ServiceAddr, ServiceFailure } from './resolver-srv.ts';
import type { Resolver } from './resolver.ts';

const NXDOMAIN = 3;

/** Bytes of shared memory that keep a server's last answer. */
export const ANSWER_MEMORY = 4096;

/**
 * The last answer is kept in shared memory (made by the master, kept over
 * reloads), so the workers of a new configuration start with it, as
 * nginx's preresolve copies the old peers. Slot 0: JSON length + 1.
 */
function rememberAnswer(mem: SharedArrayBuffer | undefined, addrs: ServiceAddr[]): void {
  if (!mem) return;
  const text = Buffer.from(JSON.stringify(addrs), 'latin1');
  if (text.length > ANSWER_MEMORY - 4) return;
  Buffer.from(mem, 4).set(text);
  Atomics.store(new Int32Array(mem, 0, 1), 0, text.length + 1);
}

function rememberedAnswer(mem: SharedArrayBuffer | undefined): ServiceAddr[] | undefined {
  if (!mem) return undefined;
  const len = Atomics.load(new Int32Array(mem, 0, 1), 0) - 1;
  if (len < 0) return undefined;
  try {
    return JSON.parse(Buffer.from(mem, 4, len).toString('latin1')) as ServiceAddr[];
  } catch {
    return undefined;
  }
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

/** nginx's ngx_http_upstream_zone_cmp_resolved: priority, weight (higher first), name, family (IPv4 first), address, port. */
function compareResolved(a: ServiceAddr, b: ServiceAddr): number {
  if (a.priority !== b.priority) return a.priority - b.priority;
  if (a.weight !== b.weight) return b.weight - a.weight;
  if (a.name !== b.name) return a.name < b.name ? -1 : 1;
  const fa = net.isIPv4(a.ip) ? 4 : 6;
  const fb = net.isIPv4(b.ip) ? 4 : 6;
  if (fa !== fb) return fa - fb;
  return addressBytes(a.ip).compare(addressBytes(b.ip)) || a.port - b.port;
}

interface Owned {
  spec: ServerSpec;
  /** The SRV target and weight it was made for (nginx compares them for a service). */
  name: string;
  weight: number;
}

/**
 * Replaces `spec`'s peers with peers for `addrs` (sorted): every other peer
 * first, as before, then these; an existing peer for the same address (and
 * SRV target and weight) is kept, one for one.
 */
function applyAnswer(g: UpstreamGroup, owners: Map<Peer, Owned>, spec: ServerSpec, addrs: ServiceAddr[]): void {
  const service = spec.resolve!.service !== undefined;
  const minPriority = addrs.reduce((m, a) => Math.min(m, a.priority), 65535);
  const lists = [g.primary.peers, g.primary.next?.peers ?? []];
  const old: Peer[] = [];
  for (let l = 0; l < 2; l++) {
    lists[l] = lists[l].filter((p) => {
      if (owners.get(p)?.spec !== spec) return true;
      old.push(p);
      return false;
    });
  }
  for (const a of addrs) {
    // beyond the lowest priority a record gives a backup peer, where the balancer has backups (nginx drops it otherwise)
    const backup = service && a.priority !== minPriority;
    if (backup && (spec.backup || !canBackup(g))) continue;
    // the server's own port (an answer remembered from before a reload may have had another)
    const port = service ? a.port : spec.resolve!.port;
    const name = addressName(a.ip, port);
    const weight = service && spec.weight === 1 ? a.weight : spec.weight;
    const server = service ? a.name : spec.name;
    const i = old.findIndex((p) => p.name === name && (!service || (owners.get(p)!.name === a.name && (spec.weight !== 1 || p.weight === weight))));
    let p: Peer;
    if (i >= 0) {
      p = old[i];
      old.splice(i, 1);
    } else {
      // a peer made at run time keeps its state in this worker (not in the zone)
      p = new Peer({ name, host: a.ip, port }, { ...spec, name: server, weight });
      owners.set(p, { spec, name: a.name, weight });
    }
    lists[spec.backup || backup ? 1 : 0].push(p);
  }
  for (const p of old) owners.delete(p);
  const [primary, backup] = lists;
  const list = new PeerList(primary, primary.length === 1 && backup.length === 0);
  if (backup.length || g.primary.next) list.next = new PeerList(backup, false);
  g.setPeers(list);
}

/** Balancers with `backup` servers (nginx's NGX_HTTP_UPSTREAM_BACKUP). */
function canBackup(g: UpstreamGroup): boolean {
  const k = g.balancer.kind;
  return k !== 'ip_hash' && k !== 'hash' && k !== 'random';
}

/**
 * Starts re-resolving the group's `resolve` servers in this worker; returns
 * the function that stops it (at worker shutdown).
 */
export function watchResolvedServers(g: UpstreamGroup, resolver: Resolver, timeoutMs: number): () => void {
  const owners = new Map<Peer, Owned>();
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  const later = (fn: () => void, ms: number) => {
    const t = setTimeout(() => { timers.delete(t); fn(); }, ms);
    t.unref();
    timers.add(t);
  };
  // looked up when logging: the worker's log is set up after this starts
  const log = { error: (m: string) => mainErrorLog().error(m), alert: (m: string) => mainErrorLog().alert(m) };
  for (const spec of g.servers) {
    const r = spec.resolve;
    if (!r) continue;
    const remembered = rememberedAnswer(r.memory);
    if (remembered) applyAnswer(g, owners, spec, remembered);
    const logFailures = (failed: ServiceFailure[]) => {
      for (const f of failed) {
        log.error(`${f.name} could not be resolved (${f.code}: ${dnsErrorText(f.code)}) while resolving service ${r.service} of ${r.host}`);
      }
    };
    const lookup = (): Promise<{ addrs: ServiceAddr[]; valid: number }> => {
      if (r.service !== undefined) {
        return resolveService(resolver, r.host, r.service, timeoutMs).then((a) => {
          logFailures(a.failed);
          return a;
        });
      }
      return resolver.resolveValid(r.host, timeoutMs).then((a) => ({
        addrs: a.addrs.map((ip) => ({ ip, port: r.port, name: '', priority: 0, weight: 0 })),
        valid: a.valid,
      }));
    };
    const run = (): void => {
      lookup().then((res) => {
        if (stopped) return;
        const addrs = res.addrs.sort(compareResolved);
        rememberAnswer(r.memory, addrs);
        applyAnswer(g, owners, spec, addrs);
        later(run, Math.max(res.valid - Date.now(), 0) + 1000);
      }, (err: unknown) => {
        if (stopped) return;
        const e = err instanceof ResolveError ? err : new ResolveError(2, 'Server failure');
        if (e instanceof ServiceError) logFailures(e.failed);
        log.error(r.service !== undefined
          ? `service ${r.service} of ${r.host} could not be resolved (${e.code}: ${e.message})`
          : `${r.host} could not be resolved (${e.code}: ${e.message})`);
        if (e.code === NXDOMAIN) {
          rememberAnswer(r.memory, []);
          applyAnswer(g, owners, spec, []);
          later(run, Math.max(e.valid - Date.now(), 0) + 1000);
          return;
        }
        later(run, Math.max(timeoutMs, 1000));
      }).catch((err: Error) => log.alert(`re-resolving ${r.host} failed: ${err.stack ?? err}`));
    };
    later(run, 1);
  }
  return () => {
    stopped = true;
    for (const t of timers) clearTimeout(t);
    timers.clear();
  };
}

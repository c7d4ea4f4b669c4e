/**
 * The other load-balancing methods of nginx's upstream modules, on top of
 * round robin (whose failure accounting and backup handling they share):
 * `ip_hash`, `hash key [consistent]`, `least_conn` and `random [two
 * [least_conn]]`. Each falls back to round robin as nginx does (a single
 * peer, an empty key, or 20 unlucky picks).
 */
import { crc32 } from 'node:zlib';
import net from 'node:net';
import type { Peer, PeerList } from './peer.ts';
import { nowSec, RoundRobinPicker } from './round-robin.ts';

/** How a group picks its peers (the directive in its `upstream {}` block). */
export type Balancer =
  | { kind: 'round_robin' }
  | { kind: 'ip_hash' }
  | { kind: 'hash'; consistent: boolean }
  | { kind: 'least_conn' }
  | { kind: 'random'; two: boolean };

/** What a request offers a balancer: the client address (ip_hash) and the evaluated hash key. */
export interface BalanceInput {
  clientAddress: string;
  key: string;
}

const PSEUDO_ADDR = [0, 0, 0];

/** nginx's ip_hash input: the first three bytes of an IPv4 address, all 16 of an IPv6 one. */
function addrBytes(addr: string): number[] {
  if (net.isIPv4(addr)) return addr.split('.').slice(0, 3).map(Number);
  if (net.isIPv6(addr)) {
    const sa = new net.SocketAddress({ address: addr, family: 'ipv6' });
    const parts = sa.address.split('::');
    const head = parts[0] ? parts[0].split(':') : [];
    const tail = parts.length > 1 && parts[1] ? parts[1].split(':') : [];
    const groups = [...head, ...new Array(8 - head.length - tail.length).fill('0'), ...tail];
    const bytes: number[] = [];
    for (const g of groups) {
      const v = parseInt(g, 16);
      bytes.push(v >> 8, v & 0xff);
    }
    return bytes;
  }
  return PSEUDO_ADDR;
}

/** The weighted walk nginx's hash methods use to map a hash to a peer index. */
function peerAt(list: PeerList, w: number): number {
  let p = 0;
  while (w >= list.peers[p].weight) {
    w -= list.peers[p].weight;
    p++;
  }
  return p;
}

class IpHashPicker extends RoundRobinPicker {
  private readonly addr: number[];
  private hash = 89;
  private misses = 0;

  constructor(list: PeerList, clientAddress: string) {
    super(list);
    this.addr = addrBytes(clientAddress);
  }

  override get(): Peer | undefined {
    const list = this.list;
    if (this.misses > 20 || list.peers.length < 2) return super.get();
    const now = nowSec();
    for (;;) {
      let hash = this.hash;
      for (const b of this.addr) hash = (hash * 113 + b) % 6271;
      this.hash = hash;
      const p = peerAt(list, hash % list.totalWeight);
      const peer = list.peers[p];
      if (!this.isTried(p) && this.usable(peer, now)) return this.take(peer, p, now);
      if (++this.misses > 20) return super.get();
    }
  }
}

class HashPicker extends RoundRobinPicker {
  private readonly key: string;
  private hash = 0;
  private rehash = 0;
  private misses = 0;

  constructor(list: PeerList, key: string) {
    super(list);
    this.key = key;
  }

  override get(): Peer | undefined {
    const list = this.list;
    if (this.misses > 20 || list.peers.length < 2 || this.key === '') return super.get();
    const now = nowSec();
    for (;;) {
      // compatible with Cache::Memcached: ((crc32([REHASH] KEY) >> 16) & 0x7fff) + PREV_HASH
      const input = this.rehash > 0 ? String(this.rehash) + this.key : this.key;
      this.hash += (crc32(Buffer.from(input, 'latin1')) >>> 16) & 0x7fff;
      this.rehash++;
      const p = peerAt(list, this.hash % list.totalWeight);
      const peer = list.peers[p];
      if (!this.isTried(p) && this.usable(peer, now)) return this.take(peer, p, now);
      if (++this.misses > 20) return super.get();
    }
  }
}

/** Points of a consistent-hash ring (ketama-like, 160 per unit of weight), built once per group. */
export interface ChashRing {
  hashes: Uint32Array;
  servers: string[];
}

/** ngx_http_upstream_update_chash: crc32(HOST \0 PORT PREV_HASH) points, sorted, duplicates dropped. */
export function buildRing(list: PeerList): ChashRing {
  const pts: { hash: number; server: string }[] = [];
  for (const peer of list.peers) {
    const server = peer.server;
    let host = server;
    let port = '';
    if (server.slice(0, 5).toLowerCase() === 'unix:') host = server.slice(5);
    else {
      const m = /^(.*):(\d*)$/.exec(server);
      if (m) { host = m[1]; port = m[2]; }
    }
    const base = Buffer.concat([Buffer.from(host, 'latin1'), Buffer.from([0]), Buffer.from(port, 'latin1')]);
    const prev = Buffer.alloc(4);
    for (let j = 0; j < peer.weight * 160; j++) {
      const hash = crc32(prev, crc32(base)) >>> 0;
      pts.push({ hash, server });
      prev.writeUInt32LE(hash);
    }
  }
  pts.sort((a, b) => a.hash - b.hash);
  const out: { hash: number; server: string }[] = [];
  for (const p of pts) if (!out.length || out[out.length - 1].hash !== p.hash) out.push(p);
  return { hashes: Uint32Array.from(out.map((p) => p.hash)), servers: out.map((p) => p.server) };
}

class ChashPicker extends RoundRobinPicker {
  private readonly ring: ChashRing;
  private readonly key: string;
  private point = 0;
  private misses = 0;

  constructor(list: PeerList, ring: ChashRing, key: string) {
    super(list);
    this.ring = ring;
    this.key = key;
    const hash = crc32(Buffer.from(key, 'latin1')) >>> 0;
    // the first point at or after the key's hash
    let i = 0;
    let j = ring.hashes.length;
    while (i < j) {
      const k = (i + j) >> 1;
      if (hash > ring.hashes[k]) i = k + 1;
      else j = k;
    }
    this.point = i;
  }

  override get(): Peer | undefined {
    const list = this.list;
    if (this.misses > 20 || list.single || this.key === '' || this.ring.hashes.length === 0) return super.get();
    const now = nowSec();
    for (;;) {
      const server = this.ring.servers[this.point % this.ring.hashes.length];
      let best: Peer | undefined;
      let bestIndex = 0;
      let total = 0;
      for (let i = 0; i < list.peers.length; i++) {
        const peer = list.peers[i];
        if (this.isTried(i) || !this.usable(peer, now) || peer.server !== server) continue;
        peer.currentWeight += peer.effectiveWeight;
        total += peer.effectiveWeight;
        if (peer.effectiveWeight < peer.weight) peer.effectiveWeight++;
        if (!best || peer.currentWeight > best.currentWeight) { best = peer; bestIndex = i; }
      }
      if (best) {
        best.currentWeight -= total;
        return this.take(best, bestIndex, now);
      }
      this.point++;
      if (++this.misses > 20) return super.get();
    }
  }
}

class LeastConnPicker extends RoundRobinPicker {
  override get(): Peer | undefined {
    for (;;) {
      const list = this.list;
      if (list.single) return super.get();
      const now = nowSec();
      let best: Peer | undefined;
      let p = 0;
      let many = false;
      for (let i = 0; i < list.peers.length; i++) {
        const peer = list.peers[i];
        if (this.isTried(i) || !this.usable(peer, now)) continue;
        // fewest connections for the weight; ties are broken by round robin
        if (!best || peer.conns * best.weight < best.conns * peer.weight) { best = peer; many = false; p = i; }
        else if (peer.conns * best.weight === best.conns * peer.weight) many = true;
      }
      if (best) {
        if (many) {
          let total = 0;
          const first = best;
          for (let i = p; i < list.peers.length; i++) {
            const peer = list.peers[i];
            if (this.isTried(i) || !this.usable(peer, now)) continue;
            if (peer.conns * first.weight !== first.conns * peer.weight) continue;
            peer.currentWeight += peer.effectiveWeight;
            total += peer.effectiveWeight;
            if (peer.effectiveWeight < peer.weight) peer.effectiveWeight++;
            if (peer.currentWeight > best.currentWeight) { best = peer; p = i; }
          }
          best.currentWeight -= total;
        }
        return this.take(best, p, now);
      }
      if (!list.next) return undefined;
      this.useBackup();
    }
  }
}

class RandomPicker extends RoundRobinPicker {
  private readonly two: boolean;
  private misses = 0;

  constructor(list: PeerList, two: boolean) {
    super(list);
    this.two = two;
  }

  /** A peer index drawn with probability proportional to its weight. */
  private peek(list: PeerList): number {
    let x = Math.floor(Math.random() * list.totalWeight);
    let i = 0;
    while (x >= list.peers[i].weight) { x -= list.peers[i].weight; i++; }
    return i;
  }

  override get(): Peer | undefined {
    const list = this.list;
    if (this.misses > 20 || list.peers.length < 2) return super.get();
    const now = nowSec();
    let prev = -1;
    for (;;) {
      const i = this.peek(list);
      const peer = list.peers[i];
      if (i !== prev && !this.isTried(i) && this.usable(peer, now)) {
        if (!this.two) return this.take(peer, i, now);
        if (prev >= 0) {
          const other = list.peers[prev];
          // of two, the one with fewer connections for its weight
          return peer.conns * other.weight > other.conns * peer.weight ? this.take(other, prev, now) : this.take(peer, i, now);
        }
        prev = i;
      }
      if (++this.misses > 20) return super.get();
    }
  }
}

/** The picker for one request to a group balanced with `b`. */
export function createPicker(b: Balancer, list: PeerList, input: BalanceInput, ring: ChashRing | undefined): RoundRobinPicker {
  switch (b.kind) {
    case 'ip_hash': return new IpHashPicker(list, input.clientAddress);
    case 'hash': return b.consistent ? new ChashPicker(list, ring!, input.key) : new HashPicker(list, input.key);
    case 'least_conn': return new LeastConnPicker(list);
    case 'random': return new RandomPicker(list, b.two);
    default: return new RoundRobinPicker(list);
  }
}

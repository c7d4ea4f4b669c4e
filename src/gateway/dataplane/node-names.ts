/**
 * Upstream nodes named by host name, resolved as APISIX resolves them
 * (apisix/core/resolver.lua, resty.dns.client): the hosts file first
 * (/etc/hosts, read once per worker), then DNS through the servers of
 * config.yaml's `apisix.dns_resolver` (else the nameservers of
 * /etc/resolv.conf) with the engine's resolver; an answer holds for its TTL,
 * or `apisix.dns_resolver_valid` seconds when that is set, and the name is
 * resolved again on the first request after that. The node keeps its name
 * (`pass_host: node` sends it); the connection goes to the address. A name
 * that does not resolve is tried by the system resolver at connect time.
 */
import fs from 'node:fs';
import net from 'node:net';
import { Resolver } from '../../upstream/resolver.ts';

interface Answer { addrs: string[]; until: number; turn: number }

let resolver: Resolver | undefined;
let hosts: Map<string, string> | undefined;
const answers = new Map<string, Answer>();
/** A failed lookup is asked again after this long (the resolver's error validity). */
const RETRY_FAILED_MS = 10_000;

function nameservers(): string[] {
  try {
    return fs.readFileSync('/etc/resolv.conf', 'utf8').split('\n')
      .map((l) => /^\s*nameserver\s+(\S+)/.exec(l)?.[1]).filter((s): s is string => s !== undefined && net.isIP(s) !== 0);
  } catch {
    return [];
  }
}

function hostsFile(): Map<string, string> {
  const m = new Map<string, string>();
  try {
    for (const line of fs.readFileSync('/etc/hosts', 'utf8').split('\n')) {
      const [ip, ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
      if (!ip || net.isIP(ip) === 0) continue;
      // the first address given for a name wins, IPv4 before IPv6 (resty.dns.client's order)
      for (const n of names) {
        const k = n.toLowerCase();
        const have = m.get(k);
        if (!have || (net.isIPv6(have) && net.isIPv4(ip))) m.set(k, ip);
      }
    }
  } catch { /* no hosts file */ }
  return m;
}

/** The worker's resolver settings, from config.yaml (`dns_resolver` entries are `ip` or `ip:port`). */
export function configureNodeNames(servers: string[] | undefined, validSeconds: number | undefined): void {
  resolver?.close();
  answers.clear();
  hosts = hostsFile();
  const list = (servers?.length ? servers : nameservers()).map((s) => {
    const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(s) ?? /^([^:]+)(?::(\d+))?$/.exec(s);
    return m && net.isIP(m[1]) ? { host: m[1], port: m[2] ? Number(m[2]) : 53 } : undefined;
  }).filter((s): s is { host: string; port: number } => s !== undefined);
  resolver = list.length ? new Resolver({ servers: list, ipv4: true, ipv6: true, validMs: validSeconds === undefined ? undefined : validSeconds * 1000 }, 5000) : undefined;
}

/** The address to connect to for `name` now (answers taken in turn), or undefined when none is known. */
export function addressOf(name: string): string | undefined {
  const a = answers.get(name.toLowerCase());
  if (!a || a.addrs.length === 0) return undefined;
  return a.addrs[a.turn++ % a.addrs.length];
}

/** Resolves the names among `hosts` whose answer is missing or expired; undefined when none needs it. */
export function resolveNames(names: string[]): Promise<void> | undefined {
  const now = Date.now();
  const due = names.filter((n) => net.isIP(n.replace(/^\[|\]$/g, '')) === 0 && !((answers.get(n.toLowerCase())?.until ?? 0) > now));
  if (due.length === 0) return undefined;
  return Promise.all(due.map(async (n) => {
    const name = n.toLowerCase();
    hosts ??= hostsFile();
    const fixed = hosts.get(name);
    if (fixed) {
      answers.set(name, { addrs: [fixed], until: Infinity, turn: 0 });
      return;
    }
    try {
      if (!resolver) throw new Error('no resolver');
      const r = await resolver.resolveValid(name);
      answers.set(name, { addrs: r.addrs, until: r.valid, turn: 0 });
    } catch {
      answers.set(name, { addrs: [], until: Date.now() + RETRY_FAILED_MS, turn: 0 });
    }
  })).then(() => undefined);
}

/**
 * The resolver's cache entry, nginx's ngx_resolver_node_t: one name with its
 * answer (while valid) or its queries in progress and who waits for them,
 * and how a cached answer is handed out.
 */
import type { SrvRecord } from './dns-message.ts';
import type { ResolveError } from './resolver-conf.ts';

/** One lookup waiting for a name's answer. */
export interface Waiter {
  resolve(addrs: string[], valid: number): void;
  reject(e: ResolveError): void;
  /** Set for an SRV lookup: gets the records (sorted by priority). */
  srv?: (srvs: SrvRecord[], valid: number) => void;
  timer: NodeJS.Timeout;
  recursion: number;
  node: NameNode | undefined;
}

/** One name: its answer (while valid) or its query in progress (nginx's ngx_resolver_node_t). */
export interface NameNode {
  name: string;
  /** The answer is good until then (ms); 0 while being resolved. */
  valid: number;
  /** Dropped from memory after then, unless in use. */
  expire: number;
  /** Addresses per family; null while that query is outstanding. */
  addrs4: string[] | null;
  addrs6: string[] | null;
  cname: string | undefined;
  /** An SRV name (its own map, one query), with its records once answered. */
  srv: boolean;
  srvs: SrvRecord[] | undefined;
  waiting: Waiter[];
  /** The queries in progress (their first two bytes are the ids). */
  query4: Buffer | undefined;
  query6: Buffer | undefined;
  tcp4: boolean;
  tcp6: boolean;
  /** An error code kept until the other family's answer comes. */
  code: number;
  ttl: number;
  server: number;
  resend: NodeJS.Timeout | undefined;
}

/** A cached answer as nginx hands it out: each family rotated, the whole list rotated too. */
export function rotated(rn: NameNode): string[] {
  const v4 = rn.addrs4!;
  const v6 = rn.addrs6!;
  const n = v4.length + v6.length;
  if (n === 1) return v4.length ? v4 : v6;
  const out = new Array<string>(n);
  let d = Math.floor(Math.random() * n);
  for (const list of [v4, v6]) {
    if (!list.length) continue;
    let j = Math.floor(Math.random() * list.length);
    for (let k = 0; k < list.length; k++) {
      out[d] = list[j];
      d = (d + 1) % n;
      j = (j + 1) % list.length;
    }
  }
  return out;
}

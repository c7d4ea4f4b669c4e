/**
 * Challenge answers every gateway node gives, not only the one that orders:
 * a validator comes through the load balancer in front of the nodes, to
 * any of them. The ordering node publishes each answer in its own shared
 * zone (its solver) and in the store, under `<prefix>/gatehouse_acme/challenges/`,
 * before the challenge is sent to the CA, and removes it once the
 * authorization is final; worker 0 of every other node follows those keys
 * and publishes them in its zone with the same solvers (http-01 on the
 * proxy port, tls-alpn-01 on the TLS port, dns-01 by the built-in
 * responder). A `dns_hook` publishes outside Gatehouse: nothing to share.
 * The keys live 10 minutes at most (a node that dies mid-order leaves
 * none behind).
 */
import type { ErrorLog } from '../../core/error-log.ts';
import type { SharedDocument } from '../../core/shared-document.ts';
import type { Identifier } from '../../acme/identifiers.ts';
import { dnsResponderSolver } from '../../acme/solvers/dns-responder.ts';
import { http01Solver } from '../../acme/solvers/http-01.ts';
import type { Solver } from '../../acme/solvers/solver.ts';
import { tlsAlpn01Solver } from '../../acme/solvers/tls-alpn-01.ts';
import type { IssuerConf } from '../../acme/state.ts';
import type { KeyValue, Store, Watcher } from '../store/store.ts';

const TTL_S = 600;
const RETRY_MS = 1000;

interface Answer { node: string; type: Solver['type']; identifier: Identifier; token: string; keyAuthorization: string }

export class SharedChallenges {
  private readonly store: Store;
  private readonly prefix: string;
  private readonly node: string;
  private readonly doc: SharedDocument;
  private readonly log: ErrorLog;
  /** The other nodes' answers published here, by key. */
  private readonly mirrored = new Map<string, Answer>();
  private watcher: Watcher | undefined;
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(store: Store, keyPrefix: string, node: string, doc: SharedDocument, log: ErrorLog) {
    this.store = store;
    this.prefix = `${keyPrefix}/gatehouse_acme/challenges/`;
    this.node = node;
    this.doc = doc;
    this.log = log;
  }

  private solverFor(type: Solver['type']): Solver {
    return type === 'tls-alpn-01' ? tlsAlpn01Solver() : type === 'dns-01' ? dnsResponderSolver(this.doc) : http01Solver(this.doc);
  }

  /** The ordering node's solver: each answer also goes to the store (and is removed from it) for the other nodes. */
  wrap(issuer: IssuerConf, solver: Solver): Solver {
    if (issuer.challenge === 'dns-01' && issuer.dnsHook) return solver;
    const key = (token: string) => this.prefix + token;
    return {
      type: solver.type,
      publish: async (identifier, token, keyAuthorization) => {
        await solver.publish(identifier, token, keyAuthorization);
        const answer: Answer = { node: this.node, type: solver.type, identifier, token, keyAuthorization };
        await this.store.put(key(token), JSON.stringify(answer), { ttl: TTL_S });
      },
      remove: async (identifier, token, keyAuthorization) => {
        await solver.remove(identifier, token, keyAuthorization);
        await this.store.delete(key(token));
      },
    };
  }

  /** Follows the other nodes' answers (list, then watch from there; again after a failure). */
  async start(): Promise<void> {
    if (this.stopped) return;
    try {
      const { kvs, revision } = await this.store.list(this.prefix);
      const present = new Set(kvs.map((kv) => kv.key));
      for (const k of [...this.mirrored.keys()]) if (!present.has(k)) this.unpublish(k);
      for (const kv of kvs) this.publish(kv);
      this.watcher = this.store.watch(revision, {
        events: (events) => {
          for (const ev of events) {
            if (ev.type === 'put') this.publish(ev.kv);
            else this.unpublish(ev.kv.key);
          }
        },
        compacted: () => { this.watcher?.cancel(); void this.start(); },
      });
    } catch (err) {
      this.log.warn(`acme: cannot follow the challenge answers of the other nodes: ${(err as Error).message}`);
      this.retry = setTimeout(() => void this.start(), RETRY_MS);
      this.retry.unref();
    }
  }

  private publish(kv: KeyValue): void {
    if (!kv.key.startsWith(this.prefix) || this.mirrored.has(kv.key)) return;
    let a: Answer;
    try { a = JSON.parse(kv.value) as Answer; } catch { return; }
    if (a.node === this.node) return;
    this.mirrored.set(kv.key, a);
    void Promise.resolve(this.solverFor(a.type).publish(a.identifier, a.token, a.keyAuthorization)).catch(() => undefined);
  }

  private unpublish(key: string): void {
    const a = this.mirrored.get(key);
    if (!a) return;
    this.mirrored.delete(key);
    void Promise.resolve(this.solverFor(a.type).remove(a.identifier, a.token, a.keyAuthorization)).catch(() => undefined);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retry);
    this.watcher?.cancel();
    for (const k of [...this.mirrored.keys()]) this.unpublish(k);
  }
}

/**
 * The etcd v3 store, for several gateway nodes sharing one configuration.
 * Keys are laid out as APISIX's (`<prefix>/routes/<id>`), values are the
 * JSON text, and etcd's own revisions are the revisions of the contract
 * (create_revision / mod_revision: the Admin API's createdIndex /
 * modifiedIndex). Compare-and-swap is a transaction on mod_revision; `ttl`
 * is a lease.
 *
 * The watch is etcd-watch.ts: one stream per process, never skipping a
 * revision.
 */
import { b64, EtcdHttp, rangeEnd, toKv } from './etcd-http.ts';
import type { EtcdConnection, Json } from './etcd-http.ts';
import { openWatchStream, SharedWatch } from './etcd-watch.ts';
import type { DeleteResult, KeyValue, PutOptions, PutResult, Store, Watcher, WatchHandlers } from './store.ts';

export interface EtcdStoreOptions extends EtcdConnection {
  /** The key prefix watched and counted (`/gateway`). */
  prefix: string;
  /** Milliseconds a watch may stay silent before it is renewed. */
  watchTimeoutMs: number;
}

export class EtcdStore implements Store {
  readonly kind = 'etcd';
  private readonly http: EtcdHttp;
  private readonly opts: EtcdStoreOptions;
  private readonly shared: SharedWatch;

  constructor(opts: EtcdStoreOptions) {
    this.opts = opts;
    this.http = new EtcdHttp(opts);
    this.shared = new SharedWatch(`${opts.hosts.join(',')}${opts.prefix}/`, (from, sink) => openWatchStream(this.http, opts, from, sink));
  }

  async get(key: string): Promise<KeyValue | undefined> {
    const r = await this.http.call('/v3/kv/range', { key: b64(key) });
    const kv = (r.kvs as Json[] | undefined)?.[0];
    return kv && toKv(kv);
  }

  async list(prefix: string, options: { keysOnly?: boolean } = {}): Promise<{ kvs: KeyValue[]; revision: number }> {
    const r = await this.http.call('/v3/kv/range', { key: b64(prefix), range_end: rangeEnd(prefix), keys_only: options.keysOnly === true });
    return { kvs: ((r.kvs as Json[] | undefined) ?? []).map(toKv), revision: Number(r.header.revision) };
  }

  async put(key: string, value: string, options: PutOptions = {}): Promise<PutResult> {
    const put: Json = { key: b64(key), value: b64(value), prev_kv: true };
    if (options.ttl !== undefined) {
      const lease = await this.http.call('/v3/lease/grant', { TTL: String(Math.max(1, Math.ceil(options.ttl))) });
      put.lease = lease.ID;
    }
    let revision: number;
    let prevRaw: Json | undefined;
    if (options.expectRevision === undefined) {
      const r = await this.http.call('/v3/kv/put', put);
      revision = Number(r.header.revision);
      prevRaw = r.prev_kv as Json | undefined;
    } else {
      const r = await this.http.call('/v3/kv/txn', {
        compare: [{ key: b64(key), target: 'MOD', result: 'EQUAL', mod_revision: String(options.expectRevision) }],
        success: [{ request_put: put }],
        failure: [{ request_range: { key: b64(key) } }],
      });
      revision = Number(r.header.revision);
      if (r.succeeded !== true) {
        const cur = (r.responses?.[0]?.response_range?.kvs as Json[] | undefined)?.[0];
        return { ok: false, revision, prev: cur && toKv(cur), kv: undefined };
      }
      prevRaw = r.responses?.[0]?.response_put?.prev_kv as Json | undefined;
    }
    const prev = prevRaw && toKv(prevRaw);
    return { ok: true, revision, prev, kv: { key, value, createRevision: prev ? prev.createRevision : revision, modRevision: revision } };
  }

  async delete(key: string, options: { prefix?: boolean; expectRevision?: number } = {}): Promise<DeleteResult> {
    const del: Json = { key: b64(key) };
    if (options.prefix) del.range_end = rangeEnd(key);
    if (options.expectRevision === undefined) {
      const r = await this.http.call('/v3/kv/deleterange', del);
      return { deleted: Number(r.deleted ?? 0), revision: Number(r.header.revision) };
    }
    const r = await this.http.call('/v3/kv/txn', {
      compare: [{ key: b64(key), target: 'MOD', result: 'EQUAL', mod_revision: String(options.expectRevision) }],
      success: [{ request_delete_range: del }],
    });
    const deleted = r.succeeded === true ? Number(r.responses?.[0]?.response_delete_range?.deleted ?? 0) : 0;
    return { deleted, revision: Number(r.header.revision) };
  }

  /** etcd's revision (of the whole cluster: other prefixes' writes count too). */
  async revision(): Promise<number> {
    const r = await this.http.call('/v3/kv/range', { key: b64(this.opts.prefix + '/'), range_end: rangeEnd(this.opts.prefix + '/'), count_only: true });
    return Number(r.header.revision);
  }

  /** One watch stream for the whole process (see etcd-watch.ts); this thread's share of it. */
  watch(fromRevision: number, handlers: WatchHandlers): Watcher {
    return this.shared.subscribe(fromRevision, handlers);
  }

  close(): void {
    this.shared.close();
    this.http.close();
  }
}

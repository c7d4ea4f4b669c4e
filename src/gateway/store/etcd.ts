/**
 * The etcd v3 store, for several gateway nodes sharing one configuration.
 * Keys are laid out as APISIX's (`<prefix>/routes/<id>`), values are the
 * JSON text, and etcd's own revisions are the revisions of the contract
 * (create_revision / mod_revision: the Admin API's createdIndex /
 * modifiedIndex). Compare-and-swap is a transaction on mod_revision; `ttl`
 * is a lease.
 *
 * The watch (APISIX's users' top complaints are here) never skips a
 * revision: it asks for `last seen + 1` every time it (re)connects, after
 * an error, after etcd comes back, and when a silent stream is renewed
 * after `watch_timeout`. etcd saying the revision is compacted, or showing
 * a smaller revision or another cluster than before (etcd wiped and
 * restarted), ends the watch with `compacted`: the follower re-lists and
 * applies what differs.
 */
import { b64, EtcdHttp, unb64 } from './etcd-http.ts';
import type { EtcdConnection, Json, Stream } from './etcd-http.ts';
import type { DeleteResult, KeyValue, PutOptions, PutResult, Store, WatchEvent, Watcher, WatchHandlers } from './store.ts';

export interface EtcdStoreOptions extends EtcdConnection {
  /** The key prefix watched and counted (`/gateway`). */
  prefix: string;
  /** Milliseconds a watch may stay silent before it is renewed. */
  watchTimeoutMs: number;
}

/** The end of the range of keys starting with `prefix` (etcd's range_end: the prefix's last byte + 1). */
function rangeEnd(prefix: string): string {
  const bytes = Buffer.from(prefix, 'utf8');
  let i = bytes.length - 1;
  while (i >= 0 && bytes[i] === 0xff) i--;
  if (i < 0) return Buffer.from([0]).toString('base64');
  const end = Buffer.from(bytes.subarray(0, i + 1));
  end[i]++;
  return end.toString('base64');
}

function toKv(kv: Json): KeyValue {
  return { key: unb64(kv.key), value: unb64(kv.value), createRevision: Number(kv.create_revision ?? 0), modRevision: Number(kv.mod_revision ?? 0) };
}

const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 2000;

export class EtcdStore implements Store {
  readonly kind = 'etcd';
  private readonly http: EtcdHttp;
  private readonly opts: EtcdStoreOptions;
  private readonly watches = new Set<() => void>();
  /** The cluster answering; another one means etcd was replaced. */
  private clusterId: string | undefined;

  constructor(opts: EtcdStoreOptions) {
    this.opts = opts;
    this.http = new EtcdHttp(opts);
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

  watch(fromRevision: number, handlers: WatchHandlers): Watcher {
    let last = fromRevision;
    let stream: Stream | undefined;
    let idle: NodeJS.Timeout | undefined;
    let retry: NodeJS.Timeout | undefined;
    let failures = 0;
    let over = false;
    /** The silence timer runs once the watch is created (before: the creation timer). */
    let idleArmed = false;
    const stop = (): void => {
      over = true;
      clearTimeout(idle);
      clearTimeout(retry);
      stream?.abort();
      this.watches.delete(stop);
    };
    this.watches.add(stop);
    const again = (delay: number): void => {
      clearTimeout(idle);
      stream?.abort();
      stream = undefined;
      if (!over) retry = setTimeout(() => void open(), delay);
    };
    const renewWhenSilent = (): void => {
      clearTimeout(idle);
      idle = setTimeout(() => again(0), this.opts.watchTimeoutMs);
    };
    const compacted = (revision: number): void => {
      stop();
      handlers.compacted(revision);
    };
    const open = async (): Promise<void> => {
      idleArmed = false;
      const prefix = this.opts.prefix + '/';
      try {
        await this.http.freshToken();
      } catch (e) {
        handlers.state?.((e as Error).message);
        again(Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** failures++));
        return;
      }
      if (over) return;
      // not even `created` within the request timeout: this stream is no good
      idle = setTimeout(() => {
        handlers.state?.(`the watch was not created within ${this.opts.timeoutMs / 1000} s`);
        again(Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** failures++));
      }, this.opts.timeoutMs);
      stream = this.http.stream('/v3/watch', {
        create_request: { key: b64(prefix), range_end: rangeEnd(prefix), start_revision: String(last + 1) },
      }, {
        message: (m) => {
          const r = m.result as Json | undefined;
          if (!r) return;
          const header = r.header as Json | undefined;
          if (r.created === true || idleArmed) { idleArmed = true; renewWhenSilent(); }
          if (r.created === true && header) {
            failures = 0;
            handlers.state?.(undefined);
            const cluster = String(header.cluster_id);
            const changed = this.clusterId !== undefined && this.clusterId !== cluster;
            this.clusterId = cluster;
            // a smaller revision than one already seen, or another cluster: etcd was wiped or replaced
            if (changed || Number(header.revision) < last) { compacted(Number(header.revision)); return; }
          }
          if (r.compact_revision !== undefined && r.compact_revision !== '0') { compacted(Number(r.compact_revision)); return; }
          if (r.canceled === true) { handlers.state?.(`the watch was cancelled: ${String(r.cancel_reason ?? '')}`); again(RETRY_MAX_MS); return; }
          const events = r.events as Json[] | undefined;
          if (!events || events.length === 0) return;
          const out: WatchEvent[] = events.map((ev) => ({ type: ev.type === 'DELETE' ? 'delete' : 'put', kv: toKv(ev.kv as Json) }));
          last = out[out.length - 1].kv.modRevision;
          handlers.events(out, last);
        },
        end: (error) => {
          handlers.state?.(error);
          again(Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** failures++));
        },
      });
    };
    void open();
    return { cancel: stop };
  }

  close(): void {
    for (const stop of [...this.watches]) stop();
    this.http.close();
  }
}

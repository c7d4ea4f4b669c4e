/**
 * Watching etcd: one watch stream per process, its changes handed to every
 * worker thread (APISIX opens one per worker process, and its users see
 * etcd's CPU go to watches, apache/apisix#11808).
 *
 * The stream never skips a revision: it asks for `last seen + 1` every
 * time it (re)connects, after an error, after etcd comes back, and when a
 * silent stream is renewed after `watch_timeout`. etcd saying the revision
 * is compacted, or showing a smaller revision or another cluster than
 * before (etcd wiped or replaced), ends it with `compacted`: the followers
 * re-list and apply what differs.
 *
 * Which thread holds the stream: the one holding a Web Lock named after
 * the endpoints and the prefix (navigator.locks, shared by the threads of a
 * process and let go when a thread ends). It hands each batch to its own
 * watchers and posts it on a BroadcastChannel of the same name to the other
 * threads'. A batch says from which revision it goes on (`prev`): a watcher
 * that had not reached it (it listed before the stream started, or a batch
 * came first from a new holder) re-lists rather than miss a change.
 */
import { BroadcastChannel } from 'node:worker_threads';
import { b64, rangeEnd, toKv } from './etcd-http.ts';
import type { EtcdHttp, Json, Stream } from './etcd-http.ts';
import type { WatchEvent, Watcher, WatchHandlers } from './store.ts';

const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 2000;

export interface StreamSink {
  /** Changes after `prev`, up to `revision`. */
  events(events: WatchEvent[], prev: number, revision: number): void;
  compacted(revision: number): void;
  state(error: string | undefined): void;
}

export interface StreamOptions {
  prefix: string;
  timeoutMs: number;
  watchTimeoutMs: number;
}

/** A watch of `prefix/` from `from + 1` that reconnects by itself; returns its stop. */
export function openWatchStream(http: EtcdHttp, opts: StreamOptions, from: number, sink: StreamSink): () => void {
  let last = from;
  let stream: Stream | undefined;
  let idle: NodeJS.Timeout | undefined;
  let retry: NodeJS.Timeout | undefined;
  let failures = 0;
  let over = false;
  /** The silence timer runs once the watch is created (before: the creation timer). */
  let idleArmed = false;
  /** The cluster answering; another one means etcd was replaced. */
  let clusterId: string | undefined;
  const prefix = opts.prefix + '/';
  const stop = (): void => {
    over = true;
    clearTimeout(idle);
    clearTimeout(retry);
    stream?.abort();
  };
  const backoff = (): number => Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** failures++);
  const again = (delay: number): void => {
    clearTimeout(idle);
    stream?.abort();
    stream = undefined;
    if (!over) retry = setTimeout(() => void open(), delay);
  };
  const renewWhenSilent = (): void => {
    clearTimeout(idle);
    idle = setTimeout(() => again(0), opts.watchTimeoutMs);
  };
  const compacted = (revision: number): void => {
    stop();
    sink.compacted(revision);
  };
  const message = (m: Json): void => {
    const r = m.result as Json | undefined;
    if (!r) return;
    const header = r.header as Json | undefined;
    if (r.created === true || idleArmed) { idleArmed = true; renewWhenSilent(); }
    if (r.created === true && header) {
      failures = 0;
      sink.state(undefined);
      const cluster = String(header.cluster_id);
      const replaced = clusterId !== undefined && clusterId !== cluster;
      clusterId = cluster;
      // a smaller revision than one already seen, or another cluster: etcd was wiped or replaced
      if (replaced || Number(header.revision) < last) { compacted(Number(header.revision)); return; }
    }
    if (r.compact_revision !== undefined && r.compact_revision !== '0') { compacted(Number(r.compact_revision)); return; }
    if (r.canceled === true) { sink.state(`the watch was cancelled: ${String(r.cancel_reason ?? '')}`); again(RETRY_MAX_MS); return; }
    const events = r.events as Json[] | undefined;
    if (!events || events.length === 0) return;
    const out: WatchEvent[] = events.map((ev) => ({ type: ev.type === 'DELETE' ? 'delete' : 'put', kv: toKv(ev.kv as Json) }));
    const prev = last;
    last = out[out.length - 1].kv.modRevision;
    sink.events(out, prev, last);
  };
  const open = async (): Promise<void> => {
    idleArmed = false;
    try {
      await http.freshToken();
    } catch (e) {
      sink.state((e as Error).message);
      again(backoff());
      return;
    }
    if (over) return;
    // not even `created` within the request timeout: this stream is no good
    idle = setTimeout(() => {
      sink.state(`the watch was not created within ${opts.timeoutMs / 1000} s`);
      again(backoff());
    }, opts.timeoutMs);
    stream = http.stream('/v3/watch', {
      create_request: { key: b64(prefix), range_end: rangeEnd(prefix), start_revision: String(last + 1) },
    }, {
      message,
      end: (error) => {
        sink.state(error);
        again(backoff());
      },
    });
  };
  void open();
  return stop;
}

type Post =
  | { type: 'events'; events: WatchEvent[]; prev: number; revision: number }
  | { type: 'compacted'; revision: number }
  | { type: 'state'; error: string | undefined };

interface Sub { last: number; handlers: WatchHandlers }

/** This thread's part in the process's one watch (see the top of the file). */
export class SharedWatch {
  private readonly name: string;
  private readonly open: (from: number, sink: StreamSink) => () => void;
  private readonly subs = new Set<Sub>();
  private readonly channel: BroadcastChannel;
  private readonly abort = new AbortController();
  private release: (() => void) | undefined;
  private stopStream: (() => void) | undefined;
  private lockAsked = false;
  private closed = false;

  constructor(name: string, open: (from: number, sink: StreamSink) => () => void) {
    this.name = `gatehouse-etcd-watch:${name}`;
    this.open = open;
    this.channel = new BroadcastChannel(this.name);
    this.channel.unref();
    this.channel.onmessage = (ev: unknown) => this.take((ev as { data: Post }).data);
  }

  subscribe(from: number, handlers: WatchHandlers): Watcher {
    const sub: Sub = { last: from, handlers };
    this.subs.add(sub);
    if (!this.lockAsked) this.askLock();
    else if (this.release && !this.stopStream) this.startStream();
    return { cancel: () => { this.subs.delete(sub); } };
  }

  private askLock(): void {
    this.lockAsked = true;
    navigator.locks.request(this.name, { signal: this.abort.signal }, () => new Promise<void>((release) => {
      this.release = release;
      if (this.closed) release();
      else if (this.subs.size > 0) this.startStream();
    })).catch(() => { /* closed while waiting for the lock */ });
  }

  /** The holder's stream, from where its own watchers are (the others catch up or re-list). */
  private startStream(): void {
    const from = Math.min(...[...this.subs].map((s) => s.last));
    this.stopStream = this.open(from, {
      events: (events, prev, revision) => this.post({ type: 'events', events, prev, revision }),
      compacted: (revision) => { this.stopStream = undefined; this.post({ type: 'compacted', revision }); },
      state: (error) => this.post({ type: 'state', error }),
    });
  }

  private post(msg: Post): void {
    this.take(msg);
    this.channel.postMessage(msg);
  }

  /** A batch, a compaction or a state change, for this thread's watchers. */
  private take(msg: Post): void {
    for (const sub of [...this.subs]) {
      if (msg.type === 'state') { sub.handlers.state?.(msg.error); continue; }
      if (msg.type === 'compacted' || sub.last < msg.prev) {
        // history this watcher needs is gone, or went by before it joined: it re-lists
        this.subs.delete(sub);
        sub.handlers.compacted(msg.type === 'compacted' ? msg.revision : msg.prev);
        continue;
      }
      if (msg.revision <= sub.last) continue;
      const fresh = msg.events.filter((e) => e.kv.modRevision > sub.last);
      sub.last = msg.revision;
      sub.handlers.events(fresh, msg.revision);
    }
  }

  close(): void {
    this.closed = true;
    this.subs.clear();
    this.stopStream?.();
    this.stopStream = undefined;
    this.channel.close();
    if (this.release) this.release();
    else this.abort.abort();
  }
}

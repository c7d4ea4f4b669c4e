/**
 * One gateway node orders the SSL objects' certificates, whatever the
 * number of nodes sharing the store (etcd): the one holding a lease key,
 * written with compare-and-swap and a time to live (etcd's lease; the
 * embedded store expires it too), refreshed at a third of its life. A node
 * that stops (or loses the store) lets the lease run out and another takes
 * it over (within a minute and a half). The holder is named by host and
 * prefix, so a reload or a restart of the same node takes its own lease
 * back at once. The key is `<prefix>/gatehouse_acme/leader`, inside the
 * configuration's prefix (the one an etcd user is granted); each refresh is
 * a write every 20 s.
 */
import type { Store } from '../store/store.ts';

const TTL_S = 60;

interface Held { holder: string; until: number }

export class StoreLease {
  private readonly store: Store;
  private readonly key: string;
  private readonly holder: string;
  private readonly onChange: (leading: boolean) => void;
  /** undefined until the first round (whose answer is always told). */
  private leading: boolean | undefined;
  /** Until when this node's last write holds the lease. */
  private until = 0;
  private revision = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(store: Store, key: string, holder: string, onChange: (leading: boolean) => void) {
    this.store = store;
    this.key = key;
    this.holder = holder;
    this.onChange = onChange;
  }

  start(): void {
    void this.round();
  }

  private async round(): Promise<void> {
    if (this.stopped) return;
    let leading: boolean;
    try {
      leading = await this.acquire();
    } catch {
      // the store is away: the lease is ours as long as our last write said
      leading = this.leading === true && Date.now() < this.until;
    }
    if (this.stopped) return;
    if (leading !== this.leading) {
      this.leading = leading;
      this.onChange(leading);
    }
    this.timer = setTimeout(() => void this.round(), (TTL_S * 1000) / 3);
    this.timer.unref();
  }

  /** Takes or refreshes the lease when it is free, expired or ours. */
  private async acquire(): Promise<boolean> {
    const kv = await this.store.get(this.key);
    let held: Held | undefined;
    try { held = kv && (JSON.parse(kv.value) as Held); } catch { held = undefined; }
    const now = Date.now();
    if (kv && held && held.holder !== this.holder && held.until > now) return false;
    const until = now + TTL_S * 1000;
    const r = await this.store.put(this.key, JSON.stringify({ holder: this.holder, until }), { expectRevision: kv ? kv.modRevision : 0, ttl: TTL_S });
    if (!r.ok) return false;
    this.until = until;
    this.revision = r.kv?.modRevision ?? r.revision;
    return true;
  }

  /** Stops refreshing; `release`: hands the lease back now (unless someone wrote it since, as a reloaded cycle does). */
  stop(release: boolean): void {
    this.stopped = true;
    clearTimeout(this.timer);
    if (release && this.leading) void this.store.delete(this.key, { expectRevision: this.revision }).catch(() => undefined);
    this.leading = false;
  }
}

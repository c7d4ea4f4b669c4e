/**
 * APISIX's standalone mode (`deployment.role: data_plane` with
 * `role_data_plane.config_provider: yaml` or `json`): the whole
 * configuration is one file, `conf/apisix.yaml` (or `conf/apisix.json`),
 * re-read when its modification time changes, checked each second as
 * APISIX does (apisix/core/config_yaml.lua). A YAML file counts only when
 * it ends with a `#END` line, so a half-written file is never applied.
 * `${{VAR}}` and `${{VAR:=default}}` are replaced from the environment
 * before parsing.
 *
 * Each collection is a list (`routes:`, `upstreams:`, `consumers:` …);
 * an item's identity is its `id` (consumers: `username`, else `arr_<n>`).
 * Every item is checked as the Admin API would check it; an invalid item
 * is skipped with APISIX's error line and the rest is applied. A file that
 * cannot be read or parsed leaves the last good configuration in place.
 *
 * To the rest of the gateway it is a read-only Store: each applied file
 * is one revision, and a watcher is told to re-list (the follower then
 * applies only what changed).
 */
import fs from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { StoreError } from './store.ts';
import type { DeleteResult, KeyValue, PutResult, Store, Watcher, WatchHandlers } from './store.ts';

/** The collections a standalone file may hold (APISIX's keys). */
export const STANDALONE_COLLECTIONS = [
  'routes', 'services', 'upstreams', 'consumers', 'consumer_groups', 'ssls', 'global_rules',
  'plugin_configs', 'plugin_metadata', 'stream_routes', 'protos', 'secrets',
];

const POLL_MS = 1000;
const READ_ONLY = 'the configuration is read-only in standalone mode (deployment.role: data_plane, config_provider: yaml)';

/** Checks one item as the Admin API would: its identity, or why it is refused. */
export type StandaloneCheck = (collection: string, id: string, item: Record<string, unknown>, view: Store) => Promise<string | undefined>;

export interface StandaloneLog {
  error(msg: string): void;
  warn(msg: string): void;
}

/** `${{VAR}}` / `${{VAR:=default}}` from the environment (apisix/cli/file.lua). */
export function substituteEnv(text: string): string {
  let missing: string | undefined;
  const out = text.replace(/\$\{\{\s*([A-Za-z0-9_]+)(?::=(.*?))?\s*\}\}/g, (_m, name: string, def: string | undefined) => {
    const v = process.env[name] ?? def?.trim();
    if (v === undefined) missing ??= name;
    return v ?? '';
  });
  if (missing !== undefined) throw new Error(`failed to handle configuration: can't find environment variable ${missing}`);
  return out;
}

/** Reads and parses the file; throws with APISIX's reason when it cannot be used. */
export function readStandaloneFile(file: string): Record<string, unknown> {
  let raw: string;
  try {
    raw = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`failed to open file ${file} : ${(e as NodeJS.ErrnoException).message}`);
  }
  let data: unknown;
  if (file.endsWith('.json')) {
    try {
      data = JSON.parse(substituteEnv(raw));
    } catch (e) {
      throw new Error(`failed to decode json: ${(e as Error).message}`);
    }
  } else {
    if (!/#END\s*$/.test(raw.slice(-10))) throw new Error(`missing valid end flag in file ${file}`);
    data = parseYaml(substituteEnv(raw));
  }
  if (data === null || data === undefined) return {};
  if (typeof data !== 'object' || Array.isArray(data)) throw new Error('expected a mapping of collections');
  return data as Record<string, unknown>;
}

export class StandaloneStore implements Store {
  readonly kind = 'yaml';
  private kvs = new Map<string, KeyValue>();
  private rev = 0;
  private mtime = -1;
  private readonly watchers = new Set<WatchHandlers>();
  private readonly timer: NodeJS.Timeout;
  private loading: Promise<void> | undefined;
  /** The first load: listings wait for it so a worker starts with the file's configuration. */
  private readonly ready: Promise<void>;

  private readonly file: string;
  private readonly prefix: string;
  private readonly check: StandaloneCheck;
  private readonly log: StandaloneLog;

  /** `prefix` ends with `/`: keys are `<prefix><collection>/<id>` as in the other stores. */
  constructor(file: string, prefix: string, check: StandaloneCheck, log: StandaloneLog) {
    this.file = file;
    this.prefix = prefix;
    this.check = check;
    this.log = log;
    // after the constructor: the check may need what its owner builds next
    this.ready = Promise.resolve().then(() => this.poll());
    this.timer = setInterval(() => void this.poll(), POLL_MS);
    this.timer.unref();
  }

  /** Applies the file when its modification time changed (one load at a time). */
  private poll(): Promise<void> {
    this.loading ??= this.load().finally(() => { this.loading = undefined; });
    return this.loading;
  }

  private async load(): Promise<void> {
    let mtime: number;
    try {
      mtime = fs.statSync(this.file).mtimeMs;
    } catch (e) {
      if (this.mtime !== -2) this.log.error(`failed to fetch ${this.file} attributes: ${(e as Error).message}`);
      this.mtime = -2;
      return;
    }
    if (mtime === this.mtime) return;
    let data: Record<string, unknown>;
    try {
      data = readStandaloneFile(this.file);
    } catch (e) {
      this.mtime = mtime;
      this.log.error(`failed to parse the content of file ${this.file}: ${(e as Error).message}`);
      return;
    }
    this.mtime = mtime;
    let next: Map<string, KeyValue>;
    try {
      next = await this.build(data);
    } catch (e) {
      this.log.error(`failed to load the content of file ${this.file}: ${(e as Error).stack ?? e}`);
      return;
    }
    if (!changed(this.kvs, next)) return;
    this.rev++;
    for (const [key, kv] of next) {
      const old = this.kvs.get(key);
      kv.createRevision = old ? old.createRevision : this.rev;
      kv.modRevision = old && old.value === kv.value ? old.modRevision : this.rev;
    }
    this.kvs = next;
    if (this.rev > 1) this.log.warn(`config file ${this.file} reloaded.`);
    for (const w of this.watchers) w.compacted(this.rev);
  }

  /** The file's items as keys, the invalid ones left out (each logged). */
  private async build(data: Record<string, unknown>): Promise<Map<string, KeyValue>> {
    const staged = new Map<string, KeyValue>();
    const items: Array<{ collection: string; id: string; key: string; item: Record<string, unknown> }> = [];
    for (const collection of STANDALONE_COLLECTIONS) {
      const list = data[collection];
      if (list === undefined || list === null) continue;
      if (!Array.isArray(list)) {
        this.log.error(`invalid item data of [${collection}], val: ${JSON.stringify(list)}, it should be an array`);
        continue;
      }
      list.forEach((item: unknown, i) => {
        if (item === null || typeof item !== 'object' || Array.isArray(item)) {
          this.log.error(`invalid item data of [${collection}/${i + 1}], val: ${JSON.stringify(item)}, it should be an object`);
          return;
        }
        const obj = item as Record<string, unknown>;
        const id = String(obj.id ?? obj.username ?? `arr_${i + 1}`);
        const key = `${this.prefix}${collection}/${id}`;
        items.push({ collection, id, key, item: obj });
        staged.set(key, { key, value: JSON.stringify(obj), createRevision: 0, modRevision: 0 });
      });
    }
    // references (upstream_id, service_id …) are checked against the file itself
    const view = new StagedView(staged);
    for (const { collection, id, key, item } of items) {
      const error = await this.check(collection, id, item, view);
      if (error !== undefined) {
        this.log.error(`failed to check item data of [${collection}] err:${error} ,val: ${JSON.stringify(item)}`);
        staged.delete(key);
        continue;
      }
      if (collection !== 'plugin_metadata' && collection !== 'consumers') item.id = id;
      staged.set(key, { key, value: JSON.stringify(item), createRevision: 0, modRevision: 0 });
    }
    return staged;
  }

  async get(key: string): Promise<KeyValue | undefined> {
    await this.ready;
    return this.kvs.get(key);
  }

  async list(prefix: string): Promise<{ kvs: KeyValue[]; revision: number }> {
    await this.ready;
    return { kvs: listed(this.kvs, prefix), revision: this.rev };
  }

  put(): Promise<PutResult> {
    return readOnly();
  }

  delete(): Promise<DeleteResult> {
    return readOnly();
  }

  async revision(): Promise<number> {
    await this.ready;
    return this.rev;
  }

  watch(fromRevision: number, handlers: WatchHandlers): Watcher {
    this.watchers.add(handlers);
    // a watcher that missed a file already applied re-lists at once
    void this.ready.then(() => { if (this.watchers.has(handlers) && fromRevision < this.rev) handlers.compacted(this.rev); });
    return { cancel: () => { this.watchers.delete(handlers); } };
  }

  close(): void {
    clearInterval(this.timer);
    this.watchers.clear();
  }
}

/** The keys under `prefix`, in byte order (as etcd and the embedded store list them). */
function listed(kvs: Map<string, KeyValue>, prefix: string): KeyValue[] {
  return [...kvs.values()].filter((kv) => kv.key.startsWith(prefix)).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

function readOnly(): Promise<never> {
  return Promise.reject(new StoreError(READ_ONLY));
}

function changed(a: Map<string, KeyValue>, b: Map<string, KeyValue>): boolean {
  if (a.size !== b.size) return true;
  for (const [k, v] of b) if (a.get(k)?.value !== v.value) return true;
  return false;
}

/** The file being loaded, as a store the Admin API's reference checks can read. */
class StagedView implements Store {
  readonly kind = 'yaml';
  private readonly kvs: Map<string, KeyValue>;
  constructor(kvs: Map<string, KeyValue>) { this.kvs = kvs; }
  async get(key: string): Promise<KeyValue | undefined> { return this.kvs.get(key); }
  async list(prefix: string): Promise<{ kvs: KeyValue[]; revision: number }> { return { kvs: listed(this.kvs, prefix), revision: 0 }; }
  put(): Promise<PutResult> { return readOnly(); }
  delete(): Promise<DeleteResult> { return readOnly(); }
  async revision(): Promise<number> { return 0; }
  watch(): Watcher { return { cancel() {} }; }
  close(): void {}
}

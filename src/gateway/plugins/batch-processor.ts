/**
 * APISIX's batch processor (apisix/utils/batch-processor.lua) and its
 * manager (batch-processor-manager.lua), per worker: a logger's entries
 * are buffered per plugin conf (APISIX's conf_version) and sent as one
 * batch when `batch_max_size` entries are in, when no entry came for
 * `inactive_timeout` seconds, or when the first is `buffer_duration` old;
 * a batch that fails is sent again after `retry_delay` seconds, up to
 * `max_retry_count` times, then dropped. The entries pending in a worker
 * are bounded by the plugin metadata's `max_pending_entries` (8192):
 * beyond it new entries are discarded, with one error line a second.
 * When the worker stops gracefully, what is buffered is sent at once and
 * retries go without their delay (APISIX's timers run premature at exit),
 * and the worker waits for those sends (flushAllBatches()).
 */
import type { PluginContext } from './phase-api.ts';

export interface BatchConf {
  name: string;
  batch_max_size: number;
  inactive_timeout: number;
  buffer_duration: number;
  max_retry_count: number;
  retry_delay: number;
}

/** Sends a batch; rejects with the reason it failed. `batchMaxSize` 1 means one entry, not a list, for most loggers. */
export type SendBatch = (entries: unknown[], batchMaxSize: number) => Promise<void>;

export interface PluginLog { error(msg: string): void; warn(msg: string): void }

let log: PluginLog = { error: () => undefined, warn: () => undefined };

/** Where the plugins' errors go (the gateway runtime's error log): the loggers', csrf's. */
export function setPluginLog(l: PluginLog): void {
  log = l;
}

export function pluginLog(): PluginLog {
  return log;
}

const DEFAULT_MAX_PENDING_ENTRIES = 8192;

/** Processors holding entries or a pending retry, for the flush at exit. */
const waiting = new Set<BatchProcessor>();
/** Sends under way in this worker. */
const sending = new Set<Promise<unknown>>();
/** Flushes under way (a reload's old generation or the worker's exit): retries go without delay meanwhile. */
let exiting = 0;

/** A timer that does not keep the worker alive: at exit flushAllBatches() sends what it waits for. */
function later(seconds: number, fn: () => void): NodeJS.Timeout {
  const t = setTimeout(fn, seconds * 1000);
  t.unref();
  return t;
}

/**
 * The worker stops serving: every buffer goes now, every retry waiting for
 * its delay goes now (and later ones without delay); resolves when nothing
 * is being sent any more.
 */
export async function flushAllBatches(): Promise<void> {
  exiting++;
  try {
    for (const p of [...waiting]) p.flushNow();
    while (sending.size > 0) await Promise.allSettled([...sending]);
  } finally {
    exiting--;
  }
}

class BatchProcessor {
  private entries: unknown[] = [];
  private firstEntryAt = 0;
  private lastEntryAt = 0;
  private timerRunning = false;
  /** Batches waiting for their retry_delay, each with its timer. */
  private readonly retries = new Map<unknown[], { timer: NodeJS.Timeout; tries: number }>();

  private readonly conf: BatchConf;
  private readonly send: SendBatch;
  /** Told how many entries left the worker (sent, or dropped after the last retry). */
  private readonly settled: (n: number) => void;

  constructor(conf: BatchConf, send: SendBatch, settled: (n: number) => void) {
    this.conf = conf;
    this.send = send;
    this.settled = settled;
  }

  push(entry: unknown): void {
    // a batch of one goes at once
    if (this.conf.batch_max_size === 1) {
      this.execute([entry], 0);
      return;
    }
    this.entries.push(entry);
    waiting.add(this);
    const now = Date.now();
    if (this.entries.length === 1) this.firstEntryAt = now;
    this.lastEntryAt = now;
    if (this.entries.length >= this.conf.batch_max_size) this.processBuffer();
    if (!this.timerRunning) this.armTimer();
  }

  private armTimer(): void {
    this.timerRunning = true;
    later(this.conf.inactive_timeout, () => this.flushIfIdle());
  }

  /** The buffer timer: flush when idle for inactive_timeout or older than buffer_duration, else wait again. */
  private flushIfIdle(): void {
    const now = Date.now();
    // a timer may fire a millisecond early: within that it counts as due
    const idle = now - this.lastEntryAt >= this.conf.inactive_timeout * 1000 - 2;
    const old = now - this.firstEntryAt >= this.conf.buffer_duration * 1000 - 2;
    if (idle || old) {
      this.processBuffer();
      this.timerRunning = false;
      return;
    }
    this.armTimer();
  }

  private processBuffer(): void {
    if (this.entries.length === 0) return;
    const batch = this.entries;
    this.entries = [];
    this.forgetIfIdle();
    this.execute(batch, 0);
  }

  /** At exit: the buffer and the batches waiting to be retried go now. */
  flushNow(): void {
    this.processBuffer();
    for (const [batch, { timer, tries }] of [...this.retries]) {
      clearTimeout(timer);
      this.retries.delete(batch);
      this.execute(batch, tries);
    }
    this.forgetIfIdle();
  }

  private forgetIfIdle(): void {
    if (this.entries.length === 0 && this.retries.size === 0) waiting.delete(this);
  }

  private execute(batch: unknown[], retries: number): void {
    const { name, max_retry_count: maxRetries, retry_delay: delay } = this.conf;
    let sent: Promise<void>;
    try {
      sent = this.send(batch, this.conf.batch_max_size);
    } catch (e) {
      sent = Promise.reject(e);
    }
    const outcome = sent.then(() => this.settled(batch.length), (e: unknown) => {
      log.error(`Batch Processor[${name}] failed to process entries: ${e instanceof Error ? e.message : String(e)}`);
      const tries = retries + 1;
      if (tries <= maxRetries) {
        if (exiting > 0) {
          this.execute(batch, tries);
          return;
        }
        const timer = later(delay, () => {
          this.retries.delete(batch);
          this.forgetIfIdle();
          this.execute(batch, tries);
        });
        this.retries.set(batch, { timer, tries });
        waiting.add(this);
        return;
      }
      this.settled(batch.length);
      log.error(`Batch Processor[${name}] exceeded the max_retry_count[${tries}] dropping the entries`);
    });
    sending.add(outcome);
    void outcome.finally(() => sending.delete(outcome));
  }
}

/** One per logger plugin: its processors by conf object, and the worker's backlog bound. */
export class BatchProcessorManager {
  /** A conf of an older configuration version is let go with its processor once its timers are done. */
  private readonly processors = new WeakMap<object, BatchProcessor>();
  private pushed = 0;
  private processed = 0;
  private discarded = 0;
  private lastDiscardLogAt = 0;

  private readonly pluginName: string;

  constructor(pluginName: string) {
    this.pluginName = pluginName;
  }

  /** add_entry / add_entry_to_new_processor: buffers `entry` for `conf`'s processor, or discards it over the bound. */
  add(conf: BatchConf, ctx: PluginContext, entry: unknown, send: SendBatch): void {
    const limit = (ctx.pluginMetadata(this.pluginName)?.max_pending_entries as number | undefined) ?? DEFAULT_MAX_PENDING_ENTRIES;
    if (this.pushed - this.processed >= limit) {
      this.reportDiscard(limit);
      return;
    }
    let p = this.processors.get(conf);
    if (!p) {
      p = new BatchProcessor(conf, send, (n) => { this.processed += n; });
      this.processors.set(conf, p);
    }
    this.pushed++;
    p.push(entry);
  }

  /** One line a second at most: the outage that discards must not flood the log too. */
  private reportDiscard(limit: number): void {
    this.discarded++;
    const now = Date.now();
    if (now - this.lastDiscardLogAt < 1000) return;
    log.error(`max pending entries limit exceeded. discarding entry. total_pushed_entries: ${this.pushed} total_processed_entries: ${this.processed} max_pending_entries: ${limit} discarded_entries: ${this.discarded}`);
    this.lastDiscardLogAt = now;
    this.discarded = 0;
  }
}

/** Entries as the loggers encode a batch: one entry as an object when batch_max_size is 1, else a JSON array. */
export function batchJson(entries: unknown[], batchMaxSize: number): string {
  return JSON.stringify(batchMaxSize === 1 ? entries[0] : entries);
}

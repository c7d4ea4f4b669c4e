/**
 * A small JSON document in a shared zone, for state that is written rarely
 * and read often by every worker thread (ACME certificates and challenge
 * answers): one writer at a time under a futex lock, a version number
 * bumped on every write, and readers that parse again only when the
 * version moved. All-zero bytes are the empty document.
 *
 * Layout: i32 0 lock | 1 version | 2 length of the JSON text; bytes from 16.
 */
import { futexLock, futexUnlock } from './shared-zone.ts';

const LOCK = 0;
const VERSION = 1;
const LENGTH = 2;
const TEXT_AT = 16;

export type DocumentData = Record<string, Record<string, unknown>>;

export class SharedDocument {
  private readonly i32: Int32Array;
  private readonly u8: Uint8Array;
  private cached: { version: number; data: DocumentData } | undefined;

  constructor(buf: SharedArrayBuffer) {
    this.i32 = new Int32Array(buf);
    this.u8 = new Uint8Array(buf);
  }

  /** The version readers compare to know whether anything changed. */
  get version(): number {
    return Atomics.load(this.i32, VERSION);
  }

  /** The document as last written (do not modify it: use update). */
  read(): DocumentData {
    const v = this.version;
    if (this.cached?.version === v) return this.cached.data;
    futexLock(this.i32, LOCK);
    try {
      this.cached = { version: Atomics.load(this.i32, VERSION), data: this.parse() };
    } finally {
      futexUnlock(this.i32, LOCK);
    }
    return this.cached.data;
  }

  /** Changes the document under the lock; throws when it no longer fits the zone. */
  update(change: (data: DocumentData) => void): void {
    futexLock(this.i32, LOCK);
    try {
      const data = this.parse();
      change(data);
      const text = Buffer.from(JSON.stringify(data), 'utf8');
      if (TEXT_AT + text.length > this.u8.length) throw new Error(`the shared zone is too small (${text.length} bytes needed)`);
      this.u8.set(text, TEXT_AT);
      Atomics.store(this.i32, LENGTH, text.length);
      Atomics.add(this.i32, VERSION, 1);
    } finally {
      futexUnlock(this.i32, LOCK);
    }
  }

  private parse(): DocumentData {
    const n = Atomics.load(this.i32, LENGTH);
    if (n === 0) return {};
    return JSON.parse(Buffer.from(this.u8.subarray(TEXT_AT, TEXT_AT + n)).toString('utf8')) as DocumentData;
  }
}

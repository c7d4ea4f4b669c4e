/**
 * nginx's postponed output (ngx_http_postpone_filter_module): a request's
 * own bytes and the bodies of the subrequests it started, sent on in the
 * order they were placed while the subrequests run side by side. What
 * cannot go out yet is held in memory, up to a limit past which writers are
 * asked to wait ('drain').
 */
import { EventEmitter } from 'node:events';
import { Writable } from 'node:stream';

/** Bytes a PostponedOutput keeps for places not yet reached before it pushes back. */
const POSTPONE_LIMIT = 64 * 1024;

interface Place {
  chunks: Buffer[];
  bytes: number;
  /** The place of a subrequest's body; undefined for the request's own bytes. */
  sink: PlaceSink | undefined;
  ended: boolean;
}

/** The output of one request with places for its subrequests' bodies. */
export class PostponedOutput extends EventEmitter {
  private readonly next: Writable;
  private readonly places: Place[] = [];
  private held = 0;
  private ending: (() => void) | undefined;

  constructor(next: Writable) {
    super();
    this.next = next;
  }

  /** The request's own bytes; false when the caller should wait for 'drain'. */
  write(chunk: Buffer): boolean {
    const places = this.places;
    if (places.length === 0) return this.next.write(chunk);
    let last = places[places.length - 1];
    if (last.sink) {
      last = { chunks: [], bytes: 0, sink: undefined, ended: true };
      places.push(last);
    }
    last.chunks.push(chunk);
    last.bytes += chunk.length;
    this.held += chunk.length;
    return this.held < POSTPONE_LIMIT;
  }

  /** A place for a subrequest's body at the current end of the output: the sink to give the subrequest. */
  place(): Writable {
    const place: Place = { chunks: [], bytes: 0, sink: undefined, ended: false };
    const sink = new PlaceSink(this, place);
    place.sink = sink;
    this.places.push(place);
    return sink;
  }

  /** Whether `place` is the one whose bytes go out now. */
  isActive(place: Place): boolean {
    return this.places[0] === place;
  }

  /** Where bytes of the place being written go (the sink writes them straight through). */
  get destination(): Writable {
    return this.next;
  }

  /** Resolves when a writer told to wait may write again (or the output is gone). */
  drained(): Promise<void> {
    const target: EventEmitter = this.places.length ? this : this.next;
    if (this.places.length ? this.held < POSTPONE_LIMIT : !this.next.writableNeedDrain || this.next.destroyed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        target.off('drain', done);
        this.next.off('close', done);
        resolve();
      };
      target.on('drain', done);
      this.next.on('close', done);
    });
  }

  /** Holds bytes of a place not reached yet; false when over the limit. */
  hold(place: Place, chunk: Buffer): boolean {
    place.chunks.push(chunk);
    place.bytes += chunk.length;
    this.held += chunk.length;
    return this.held < POSTPONE_LIMIT;
  }

  /** Sends what can go out now: places in order until one that is still being written. */
  advance(): void {
    const places = this.places;
    while (places.length) {
      const p = places[0];
      if (p.bytes) {
        for (const c of p.chunks) this.next.write(c);
        this.held -= p.bytes;
        p.chunks = [];
        p.bytes = 0;
      }
      if (!p.ended) {
        p.sink!.activate();
        break;
      }
      places.shift();
    }
    if (this.held < POSTPONE_LIMIT) this.emit('drain');
    if (places.length === 0 && this.ending) {
      const done = this.ending;
      this.ending = undefined;
      done();
    }
  }

  /** The request's own output is over: `done` runs once every place went out. */
  end(done: () => void): void {
    this.ending = done;
    this.advance();
  }
}

/** The sink of one subrequest's place in a PostponedOutput. */
class PlaceSink extends Writable {
  private readonly out: PostponedOutput;
  private readonly place: Place;
  /** A write held back until this place is reached (over the hold limit). */
  private waiting: (() => void) | undefined;

  constructor(out: PostponedOutput, place: Place) {
    super({ decodeStrings: true });
    this.out = out;
    this.place = place;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (!this.out.isActive(this.place)) {
      if (this.out.hold(this.place, chunk)) cb();
      else this.waiting = cb;
      return;
    }
    const next = this.out.destination;
    if (next.write(chunk) || next.destroyed) cb();
    else next.once('drain', () => cb());
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.place.ended = true;
    cb();
    if (this.out.isActive(this.place)) this.out.advance();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.place.ended = true;
    cb(err);
  }

  /** This place is reached: held writes continue. */
  activate(): void {
    const w = this.waiting;
    this.waiting = undefined;
    if (w) w();
  }
}

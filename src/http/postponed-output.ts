/**
 * nginx's postponed output (ngx_http_postpone_filter_module): a request's
 * own bytes and the bodies of the subrequests it started, sent on in the
 * order they were placed while the subrequests run side by side. What
 * cannot go out yet is held in memory, up to a limit past which writers are
 * asked to wait. Output goes to the body filters after its owner's
 * (src/http/body-filter.ts); the owner's resume hook calls downstreamReady.
 */
import { Writable } from 'node:stream';
import { nextBodyFilter } from './body-filter.ts';
import type { BodyFilterEntry } from './body-filter.ts';
import type { HttpRequest } from './request.ts';

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
export class PostponedOutput {
  private readonly r: HttpRequest;
  /** The body filter that owns this output: bytes go to the filters after it. */
  private readonly owner: BodyFilterEntry;
  private readonly places: Place[] = [];
  private held = 0;
  private ending: (() => void) | undefined;
  /** The filters after the owner asked to wait. */
  private downstreamBusy = false;
  /** Writers of the request's own bytes told to wait. */
  private readyWaiters: Array<() => void> = [];
  /** A place's write that waits for the filters after the owner. */
  private downstreamWaiters: Array<() => void> = [];

  constructor(r: HttpRequest, owner: BodyFilterEntry) {
    this.r = r;
    this.owner = owner;
  }

  /** To the filters after the owner; false when they ask to wait. */
  send(chunk: Buffer): boolean {
    if (nextBodyFilter(this.r, this.owner, chunk, false)) return true;
    this.downstreamBusy = true;
    return false;
  }

  /** The request's own bytes; false when the caller should wait (whenReady). */
  write(chunk: Buffer): boolean {
    const places = this.places;
    if (places.length === 0) return this.send(chunk);
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

  /** Whether a writer told to wait may write again. */
  private get ready(): boolean {
    return this.places.length ? this.held < POSTPONE_LIMIT : !this.downstreamBusy;
  }

  /** Runs `fn` when a writer told to wait may write again. */
  whenReady(fn: () => void): void {
    if (this.ready) fn();
    else this.readyWaiters.push(fn);
  }

  /** Runs `fn` when the filters after the owner can take more. */
  whenDownstreamReady(fn: () => void): void {
    if (!this.downstreamBusy) fn();
    else this.downstreamWaiters.push(fn);
  }

  /** The filters after the owner can take more. */
  downstreamReady(): void {
    this.downstreamBusy = false;
    const waiting = this.downstreamWaiters;
    if (waiting.length) {
      this.downstreamWaiters = [];
      for (const fn of waiting) fn();
    }
    this.wake();
  }

  private wake(): void {
    if (this.readyWaiters.length === 0 || !this.ready) return;
    const waiting = this.readyWaiters;
    this.readyWaiters = [];
    for (const fn of waiting) fn();
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
        for (const c of p.chunks) this.send(c);
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
    this.wake();
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
    if (this.out.send(chunk)) cb();
    else this.out.whenDownstreamReady(() => cb());
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

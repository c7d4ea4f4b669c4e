/**
 * limit_rate and limit_rate_after (directives of nginx's core module, done
 * in its write filter): a response is sent to the client at most `rate`
 * bytes per second, counted from the request's start, after the first
 * `limit_rate_after` bytes. nginx's arithmetic: what may go now is
 * rate × (whole seconds since the request began + 1) − (bytes sent −
 * after); after each write it waits as long as those bytes take at the
 * rate. The filter sits last in the chain and holds at most the chunk the
 * writer handed it (the writer waits meanwhile), so no body is buffered
 * whole.
 *
 * The rate is fixed once, when the head goes out (nginx's limit_rate_set):
 * `set $limit_rate`, an upstream's X-Accel-Limit-Rate (and an unbuffered
 * upstream's 0) set it before, and win over the location's value.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { setting } from '../../conf/setters.ts';
import { parseSize, sizeArg } from '../../conf/values.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { EMPTY_CHUNK, joinBodyFilter, nextBodyFilter, resumeBody } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { limitRateOf } from '../upstream/limit-rate.ts';

interface LimitRateConf {
  rate?: number | ComplexValue;
  after?: number | ComplexValue;
}

const LIMIT_RATE_DEFAULTS = { rate: 0, after: 0 } satisfies LimitRateConf;

const limitRateSlot = defineSlot<LimitRateConf, typeof LIMIT_RATE_DEFAULTS>('limit_rate', () => ({}), inheritUnset, LIMIT_RATE_DEFAULTS);

/** ngx_http_set_complex_value_size_slot: a size, or a value with variables read per response (not a size: 0). */
function sizeOrComplex(cf: ConfContext, text: string): number | ComplexValue {
  const v = compileComplex(cf, httpMainOf(cf).variables, text);
  return v.constant === undefined ? v : sizeArg(cf, v.constant);
}

/** r.ctx key of a response's Throttle. */
const THROTTLE = {};

/** One response's pacing. */
class Throttle {
  private readonly r: HttpRequest;
  private readonly self: BodyFilterEntry;
  private readonly rate: number;
  private readonly after: number;
  private readonly startSec: number;
  /** What the writer handed over and may not go yet. */
  private held: Buffer[] = [];
  private eof = false;
  private ended = false;
  /** nginx's c->write->delayed: nothing goes until it fires. */
  private timer: NodeJS.Timeout | undefined;
  /** The sink asked to wait; its drain resumes the chain through resume(). */
  private sinkBusy = false;
  /** Body bytes passed on (an HTTP/2 stream counts what it sent only once it went out). */
  private passed = 0;

  constructor(r: HttpRequest, self: BodyFilterEntry, rate: number, after: number) {
    this.r = r;
    this.self = self;
    this.rate = rate;
    this.after = after;
    this.startSec = Math.floor(r.startMs / 1000);
    r.sink.onClose(() => this.stop());
  }

  write(chunk: Buffer, eof: boolean): boolean {
    if (chunk.length) this.held.push(chunk);
    if (eof) this.eof = true;
    this.pump();
    return this.idle();
  }

  /** The sink drained. */
  resume(): boolean {
    this.sinkBusy = false;
    this.pump();
    return this.idle();
  }

  private idle(): boolean {
    return this.timer === undefined && !this.sinkBusy && this.held.length === 0;
  }

  private stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.held = [];
  }

  private delay(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.r.sink.destroyed) return;
      this.pump();
      if (this.idle() && !this.ended) resumeBody(this.r, this.self);
    }, ms);
  }

  private pump(): void {
    const r = this.r;
    while (this.timer === undefined && !this.sinkBusy && !this.ended) {
      if (this.held.length === 0) {
        if (this.eof) {
          this.ended = true;
          nextBodyFilter(r, this.self, EMPTY_CHUNK, true);
        }
        return;
      }
      const sent = this.sent();
      const limit = this.rate * (Math.floor(Date.now() / 1000) - this.startSec + 1) - (sent - this.after);
      if (limit <= 0) {
        this.delay(Math.floor((-limit * 1000) / this.rate) + 1);
        return;
      }
      const piece = this.take(limit);
      const last = this.eof && this.held.length === 0;
      if (last) this.ended = true;
      this.passed += piece.length;
      const more = nextBodyFilter(r, this.self, piece, last);
      const paced = Math.max(0, this.sent() - this.after) - Math.max(0, sent - this.after);
      const ms = Math.floor((paced * 1000) / this.rate);
      if (ms > 0 && !last) this.delay(ms);
      if (!more) this.sinkBusy = true;
    }
  }

  /** nginx's c->sent: what reached the connection, head and framing included (HTTP/1), at least the body passed on. */
  private sent(): number {
    return Math.max(this.passed, this.r.sink.bytesSent);
  }

  /** Up to `limit` bytes off the front of what is held. */
  private take(limit: number): Buffer {
    const first = this.held[0];
    if (first.length <= limit) {
      this.held.shift();
      return first;
    }
    this.held[0] = first.subarray(limit);
    return first.subarray(0, limit);
  }
}

function limitRateHeaderFilter(r: HttpRequest, self: BodyFilterEntry): void {
  const conf = r.level.get(limitRateSlot);
  r.limitRate ??= limitRateOf(r, conf.rate);
  if (r.limitRate === 0 || r.method === 'HEAD') return;
  r.ctx.set(THROTTLE, new Throttle(r, self, r.limitRate, limitRateOf(r, conf.after)));
  joinBodyFilter(r, self);
}

const throttleOf = (r: HttpRequest) => r.ctx.get(THROTTLE) as Throttle;

const directives: Directive[] = [
  { name: 'limit_rate', contexts: HTTP_ANY | Ctx.LIF, args: 1, handler: setting(limitRateSlot, 'rate', sizeOrComplex) },
  { name: 'limit_rate_after', contexts: HTTP_ANY | Ctx.LIF, args: 1, handler: setting(limitRateSlot, 'after', sizeOrComplex) },
];

export const limitRateModule: HttpModule = {
  name: 'ngx_http_limit_rate',
  directives,
  variables: [{
    // nginx's r->limit_rate: 0 until set or until the head went out; `set $limit_rate 40k` takes a size
    name: 'limit_rate', noCache: true,
    get: (r) => String(r.limitRate ?? 0),
    set(r, v) {
      const n = parseSize(v);
      if (Number.isNaN(n)) requestLog(r).error(`invalid $limit_rate "${v}"`);
      else r.limitRate = n;
    },
  }],
  postconfiguration(http) {
    // nginx's write filter: after every other filter (chunked is 1800), nearest the sink
    const body = http.addBodyFilter(1900, (r, chunk, eof) => throttleOf(r).write(chunk, eof), (r) => throttleOf(r).resume());
    http.addHeaderFilter(1900, (r) => limitRateHeaderFilter(r, body));
  },
};

/**
 * ngx_http_addition_filter_module: `add_before_body uri` and
 * `add_after_body uri` put the bodies of subrequests before and after the
 * body of a 200 response of the `addition_types` (text/html by default),
 * for the client's request only (not for subrequests, so a location may add
 * itself). The response loses its length and Accept-Ranges, its ETag
 * becomes weak.
 *
 * The header filter sits where nginx's does (800: after the headers
 * filter, before sub_filter); the body goes through the filters between
 * (sub, charset, SSI) and is put in order with the added bodies at nginx's
 * postpone filter (1400), before gzip, so the whole page is compressed.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import { setting } from '../../conf/setters.ts';
import { stringArg } from '../../conf/values.ts';
import { EMPTY_CHUNK, joinBodyFilter, nextBodyFilter, resumeBody } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import type { HttpModule } from '../http-conf.ts';
import { PostponedOutput } from '../postponed-output.ts';
import type { HttpRequest } from '../request.ts';
import { createSubrequest } from '../subrequest.ts';
import { logSubrequest } from '../phases.ts';
import { typeMatches, typesDirective, weakenEtag } from './gzip.ts';

interface AdditionConf {
  before?: string;
  after?: string;
  types?: Set<string>;
}

const ADDITION_DEFAULTS = { before: '', after: '', types: new Set(['text/html']) };

const additionSlot = defineSlot<AdditionConf, typeof ADDITION_DEFAULTS>('addition', () => ({}), inheritUnset, ADDITION_DEFAULTS);

/** r.ctx key of a response's AdditionOutput. */
const ADDITION = {};

/** One response's body with the added bodies in their places. */
class AdditionOutput {
  private readonly r: HttpRequest;
  private readonly self: BodyFilterEntry;
  private readonly output: PostponedOutput;
  private readonly before: string;
  private readonly after: string;
  private started = false;
  /** The writer was told to wait for the output. */
  private waiting = false;
  private resuming = false;

  constructor(r: HttpRequest, self: BodyFilterEntry, before: string, after: string) {
    this.r = r;
    this.self = self;
    this.output = new PostponedOutput(r, self);
    this.before = before;
    this.after = after;
  }

  /** The body filter: the before body's place comes first, the after body's at the end. */
  write(chunk: Buffer, eof: boolean): boolean {
    if (!this.started) {
      this.started = true;
      if (this.before) this.add(this.before);
    }
    const ok = chunk.length === 0 || this.output.write(chunk);
    if (eof) {
      if (this.after) this.add(this.after);
      this.output.end(() => nextBodyFilter(this.r, this.self, EMPTY_CHUNK, true));
      return true;
    }
    if (ok) return true;
    this.waiting = true;
    this.output.whenReady(this.ready);
    return !this.waiting;
  }

  /** The filters after this one can take more: held bytes go on. */
  resume(): boolean {
    this.resuming = true;
    this.output.downstreamReady();
    this.resuming = false;
    return !this.waiting;
  }

  private readonly ready = (): void => {
    if (!this.waiting) return;
    this.waiting = false;
    if (!this.resuming) resumeBody(this.r, this.self);
  };

  /** A subrequest for `uri` whose body goes in the output's current place. */
  private add(uri: string): void {
    const place = this.output.place();
    // logged as its body ends, before the page goes on
    const sub = createSubrequest(this.r, uri, '', { sink: place, onBodyEnd: logSubrequest });
    if (!sub) {
      place.end();
      return;
    }
    sub.start();
  }
}

function additionHeaderFilter(r: HttpRequest, body: BodyFilterEntry): void {
  if ((r.status || 200) !== 200) return;
  const conf = r.level.get(additionSlot);
  if (!conf.before && !conf.after) return;
  if (!typeMatches(r, conf.types)) return;
  r.contentLength = undefined;
  r.setHeader('Content-Length', undefined);
  r.setHeader('Accept-Ranges', undefined);
  weakenEtag(r);
  if (r.method === 'HEAD') return;
  r.ctx.set(ADDITION, new AdditionOutput(r, body, conf.before, conf.after));
  joinBodyFilter(r, body);
}

export const additionModule: HttpModule = {
  name: 'ngx_http_addition_filter_module',
  directives: [
    { name: 'add_before_body', contexts: HTTP_ANY, args: 1, handler: setting(additionSlot, 'before', stringArg) },
    { name: 'add_after_body', contexts: HTTP_ANY, args: 1, handler: setting(additionSlot, 'after', stringArg) },
    typesDirective('addition_types', additionSlot),
  ],
  postconfiguration(http) {
    // the body is put in order at nginx's postpone filter (1400); the header filter is the addition filter's (800)
    const body = http.addBodyFilter(1400, (r, chunk, eof) => (r.ctx.get(ADDITION) as AdditionOutput).write(chunk, eof),
      (r) => (r.ctx.get(ADDITION) as AdditionOutput).resume());
    http.addHeaderFilter(800, (r) => additionHeaderFilter(r, body));
  },
};

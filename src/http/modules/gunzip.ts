/**
 * ngx_http_gunzip_filter_module: a response with `Content-Encoding: gzip`
 * goes to a client that did not ask for gzip (or to a subrequest, which
 * never does) decompressed. The response loses Content-Encoding,
 * Content-Length and Accept-Ranges, its ETag becomes weak, and with
 * `gzip_vary on` it says it varies by Accept-Encoding either way. Several
 * gzip members in a row come out one after the other, as nginx's inflate
 * loop does. Backpressure passes through as in the gzip filter.
 */
import zlib from 'node:zlib';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { setting } from '../../conf/setters.ts';
import { bufsArg, flagArg } from '../../conf/values.ts';
import { joinBodyFilter, nextBodyFilter, resumeBody } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { gzipTested, markGzipVary, weakenEtag } from './gzip.ts';

interface GunzipConf {
  enable?: boolean;
  /** gunzip_buffers: accepted; zlib's own buffers hold what is in flight. */
  buffers?: { count: number; size: number };
}

const GUNZIP_DEFAULTS = { enable: false } satisfies GunzipConf;

const gunzipSlot = defineSlot<GunzipConf, typeof GUNZIP_DEFAULTS>('gunzip', () => ({}), inheritUnset, GUNZIP_DEFAULTS);

/** r.ctx key of a response's GunzipBody. */
const GUNZIP_BODY = {};

/** One response's inflate stream between the filters before it and those after. */
class GunzipBody {
  private readonly r: HttpRequest;
  private readonly self: BodyFilterEntry;
  private readonly inflate: zlib.Gunzip;
  /** The filters after this one asked to wait: inflate's output is paused. */
  private blocked = false;
  /** inflate's input is full: the writers wait for its 'drain'. */
  private full = false;

  constructor(r: HttpRequest, self: BodyFilterEntry) {
    this.r = r;
    this.self = self;
    const inflate = zlib.createGunzip();
    this.inflate = inflate;
    inflate.on('data', (out: Buffer) => {
      if (!nextBodyFilter(r, self, out, false) && !this.blocked) {
        this.blocked = true;
        inflate.pause();
      }
    });
    inflate.on('end', () => nextBodyFilter(r, self, Buffer.alloc(0), true));
    inflate.on('drain', () => {
      this.full = false;
      if (!this.blocked) resumeBody(r, self);
    });
    inflate.on('error', (err: Error & { errno?: number }) => {
      requestLog(r).error(`inflate() failed: ${err.errno ?? -1}, ${err.message}`);
      r.sink.abort();
    });
  }

  write(chunk: Buffer, eof: boolean): boolean {
    if (chunk.length && !this.inflate.write(chunk)) this.full = true;
    if (eof) this.inflate.end();
    return !this.full && !this.blocked;
  }

  resume(): boolean {
    if (this.blocked) {
      this.blocked = false;
      this.inflate.resume();
    }
    return !this.full;
  }
}

function gunzipHeaderFilter(r: HttpRequest, self: BodyFilterEntry): void {
  if (!r.level.get(gunzipSlot).enable) return;
  if (r.getHeader('content-encoding')?.toLowerCase() !== 'gzip') return;
  markGzipVary(r);
  // a client (not a subrequest) that takes gzip gets it as it is
  if (gzipTested(r)) return;
  r.setHeader('Content-Encoding', undefined);
  r.contentLength = undefined;
  r.setHeader('Content-Length', undefined);
  r.setHeader('Accept-Ranges', undefined);
  weakenEtag(r);
  if (r.method === 'HEAD') return;
  r.ctx.set(GUNZIP_BODY, new GunzipBody(r, self));
  joinBodyFilter(r, self);
}

const bodyOf = (r: HttpRequest) => r.ctx.get(GUNZIP_BODY) as GunzipBody;

const directives: Directive[] = [
  { name: 'gunzip', contexts: HTTP_ANY, args: 'flag', handler: setting(gunzipSlot, 'enable', flagArg) },
  { name: 'gunzip_buffers', contexts: HTTP_ANY, args: 2, handler: setting(gunzipSlot, 'buffers', (cf, _v, a) => bufsArg(cf, a[0], a[1])) },
];

export const gunzipModule: HttpModule = {
  name: 'ngx_http_gunzip_filter_module',
  directives,
  postconfiguration(http) {
    // nginx's place: after userid (600), before addition (800), sub (900) and SSI (1300), which see plain text
    const body = http.addBodyFilter(700, (r, chunk, eof) => bodyOf(r).write(chunk, eof), (r) => bodyOf(r).resume());
    http.addHeaderFilter(700, (r) => gunzipHeaderFilter(r, body), { subrequests: true });
  },
};

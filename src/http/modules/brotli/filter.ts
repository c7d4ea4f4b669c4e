/**
 * ngx_http_brotli_filter_module (google/ngx_brotli; Debian's
 * libnginx-mod-http-brotli-filter): `brotli on` compresses a response of
 * status 200, 403 or 404 with a body, no Content-Encoding yet, a type in
 * brotli_types (text/html always), and not shorter than brotli_min_length
 * when its length is known, for a client's request (not a subrequest) whose
 * Accept-Encoding names `br` without q=0. The response gets
 * `Content-Encoding: br`, loses Content-Length and Accept-Ranges, its ETag
 * turns weak, and `Vary: Accept-Encoding` comes with gzip_vary. It sits just
 * before gzip's filter (which then sees the encoding and keeps off). The
 * window shrinks to a known length; nginx's flush buffers flush the stream.
 * `$brotli_ratio`.
 *
 * The gateway's brotli plugin (APISIX's, node:zlib underneath) asks for it
 * per request with its own parameters (useBrotli): any status, a flush after
 * every piece, the headers already set by the plugin.
 */
import zlib from 'node:zlib';
import { defineSlot, inheritUnset } from '../../../conf/context.ts';
import type { MergedConf } from '../../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../../conf/directive.ts';
import type { Directive } from '../../../conf/directive.ts';
import { boundedNumberArg, bufsArg, flagArg, sizeArg } from '../../../conf/values.ts';
import { setting } from '../../../conf/setters.ts';
import { joinBodyFilter } from '../../body-filter.ts';
import type { BodyFilterEntry } from '../../body-filter.ts';
import type { HttpModule } from '../../http-conf.ts';
import type { HttpRequest } from '../../request.ts';
import { CompressedBody, compressionRatio } from '../compressed-body.ts';
import { markGzipVary, typeMatches, typesDirective, weakenEtag } from '../gzip.ts';

interface BrotliConf {
  enable?: boolean;
  quality?: number;
  /** log2 of the window. */
  lgwin?: number;
  minLength?: number;
  types?: Set<string>;
}

const brotliSlot = defineSlot<BrotliConf, Required<BrotliConf>>('brotli', () => ({}), inheritUnset, {
  enable: false, quality: 6, lgwin: 19, minLength: 20, types: new Set(['text/html']),
});
type Brotli = MergedConf<typeof brotliSlot>;

/** The gateway plugin's parameters for one response (APISIX's brotli conf). */
export interface BrotliRequest { quality: number; lgwin: number; lgblock: number; mode: number }

const REQUEST_BROTLI = {};
const BROTLI_BODY = {};

const MIN_WINDOW_BITS = 10;

/** The gateway's brotli plugin compresses this response (its header filter decided and set the headers). */
export function useBrotli(r: HttpRequest, params: BrotliRequest): void {
  r.ctx.set(REQUEST_BROTLI, params);
}

/** check_accept_encoding: `br` as a token (after nothing, `,` or a space), not with q=0 (0, 0., 0.0, 0.00, 0.000). */
export function acceptsBr(value: string | undefined): boolean {
  if (value === undefined) return false;
  const lower = value.toLowerCase();
  for (let at = lower.indexOf('br'); at >= 0; at = lower.indexOf('br', at + 2)) {
    const before = at === 0 ? ' ' : lower[at - 1];
    const after = lower[at + 2] ?? ' ';
    if ((before !== ',' && before !== ' ') || (after !== ',' && after !== ' ' && after !== ';')) continue;
    // refused only by a q of zero: `0`, `0.`, and up to three zero decimals (what follows them is not read)
    const rest = lower.slice(at + 2);
    return !/^ *; *q *= *0/.test(rest) || /^ *; *q *= *0\.0{0,2}[1-9]/.test(rest);
  }
  return false;
}

function brotliHeaderFilter(r: HttpRequest, body: BodyFilterEntry): void {
  const forced = r.ctx.get(REQUEST_BROTLI) as BrotliRequest | undefined;
  if (forced) {
    if (r.method === 'HEAD') return;
    r.contentLength = undefined;
    start(r, body, forced, true);
    return;
  }
  const conf = r.level.get(brotliSlot);
  if (!conf.enable) return;
  const status = r.status || 200;
  if (status !== 200 && status !== 403 && status !== 404) return;
  if (r.method === 'HEAD') return;
  if (r.getHeader('content-encoding')) return;
  if (r.contentLength !== undefined && r.contentLength < conf.minLength) return;
  if (!typeMatches(r, conf.types)) return;
  markGzipVary(r);
  if (r.parent !== undefined || !acceptsBr(r.header('accept-encoding'))) return;
  r.addHeader('Content-Encoding', 'br');
  const length = r.contentLength;
  r.contentLength = undefined;
  r.setHeader('Accept-Ranges', undefined);
  weakenEtag(r);
  start(r, body, { quality: conf.quality, lgwin: windowFor(conf, length), lgblock: 0, mode: 0 }, false);
}

/** A known length takes the smallest window that holds it. */
function windowFor(conf: Brotli, length: number | undefined): number {
  if (length === undefined || length <= 0) return conf.lgwin;
  let bits = MIN_WINDOW_BITS;
  while (bits < conf.lgwin && length > 1 << bits) bits++;
  return bits;
}

function start(r: HttpRequest, body: BodyFilterEntry, p: BrotliRequest, flushEach: boolean): void {
  const { constants: k } = zlib;
  const params: Record<number, number> = { [k.BROTLI_PARAM_QUALITY]: p.quality, [k.BROTLI_PARAM_MODE]: p.mode, [k.BROTLI_PARAM_LGBLOCK]: p.lgblock };
  // lgwin 0 is the encoder's own choice (APISIX's conf may say so); zlib refuses 0
  if (p.lgwin !== 0) params[k.BROTLI_PARAM_LGWIN] = p.lgwin;
  const engine = zlib.createBrotliCompress({ params });
  r.ctx.set(BROTLI_BODY, new CompressedBody(r, body, engine, {}, { bufferSize: 0, flushKind: k.BROTLI_OPERATION_FLUSH, flushEach }));
  joinBodyFilter(r, body);
}

const directives: Directive[] = [
  { name: 'brotli', contexts: HTTP_ANY | Ctx.LIF, args: 'flag', handler: setting(brotliSlot, 'enable', flagArg) },
  // deprecated in ngx_brotli and unused: read and checked only
  { name: 'brotli_buffers', contexts: HTTP_ANY, args: 2, handler: (cf, node) => void bufsArg(cf, node.args[0], node.args[1]) },
  typesDirective('brotli_types', brotliSlot),
  {
    name: 'brotli_comp_level', contexts: HTTP_ANY, args: 1,
    handler: setting(brotliSlot, 'quality', boundedNumberArg(0, 11)),
  },
  {
    name: 'brotli_window', contexts: HTTP_ANY, args: 1,
    handler: setting(brotliSlot, 'lgwin', (cf, v) => {
      const bits = Math.log2(sizeArg(cf, v));
      if (!Number.isInteger(bits) || bits < MIN_WINDOW_BITS || bits > 24) {
        throw cf.error('"brotli_window" directive must be 1k, 2k, 4k, 8k, 16k, 32k, 64k, 128k, 256k, 512k, 1m, 2m, 4m, 8m or 16m');
      }
      return bits;
    }),
  },
  { name: 'brotli_min_length', contexts: HTTP_ANY, args: 1, handler: setting(brotliSlot, 'minLength', sizeArg) },
];

export const brotliFilterModule: HttpModule = {
  name: 'ngx_http_brotli_filter_module',
  directives,
  variables: [{ name: 'brotli_ratio', noCache: true, get: (r) => compressionRatio(r.ctx.get(BROTLI_BODY) as CompressedBody | undefined) }],
  postconfiguration(http) {
    // ngx_brotli's module order puts it right before gzip (1500): gzip then sees Content-Encoding
    const body = http.addBodyFilter(1490, (r, chunk, eof) => (r.ctx.get(BROTLI_BODY) as CompressedBody).write(chunk, eof),
      (r) => (r.ctx.get(BROTLI_BODY) as CompressedBody).resume());
    http.addHeaderFilter(1490, (r) => brotliHeaderFilter(r, body));
  },
};

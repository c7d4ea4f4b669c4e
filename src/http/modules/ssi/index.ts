/**
 * ngx_http_ssi_filter_module: server side includes in responses of the
 * `ssi_types` (text/html by default) where `ssi on` — echo, set, config,
 * if/elif/else/endif, block, and include (subrequests placed in the output,
 * waited for, or captured into a variable) — plus $date_local and
 * $date_gmt.
 *
 * The header and body filters run where nginx has them (before gzip and
 * range, which must see the length SSI removes, and before gzip compresses
 * the body); both also run for subrequests.
 */
import type { Directive } from '../../../conf/directive.ts';
import { Ctx, HTTP_ANY } from '../../../conf/directive.ts';
import { flagArg, sizeArg } from '../../../conf/values.ts';
import { joinBodyFilter } from '../../body-filter.ts';
import type { BodyFilterEntry } from '../../body-filter.ts';
import { setting } from '../../../conf/setters.ts';
import type { HttpModule } from '../../http-conf.ts';
import type { HttpRequest } from '../../request.ts';
import { clearForChangedBody, typeMatches, typesDirective } from '../gzip.ts';
import { SSI_CTX, SsiContext, ssiSlot } from './context.ts';
import { DEFAULT_TIMEFMT } from './context.ts';
import { SsiFilter } from './filter.ts';
import { strftime } from './strftime.ts';

function ssiHeaderFilter(r: HttpRequest, body: BodyFilterEntry): void {
  const conf = r.level.get(ssiSlot);
  if (!conf.enable || r.contentLength === 0 || !typeMatches(r, conf.types)) return;
  const ctx = new SsiContext(conf);
  r.ctx.set(SSI_CTX, ctx);
  if (r.method !== 'HEAD') {
    r.ctx.set(SSI_FILTER, new SsiFilter(r, ctx, body));
    joinBodyFilter(r, body);
  }
  if (r.parent) return;
  // the length changes, and ranges of the file are not ranges of the page
  clearForChangedBody(r, conf.lastModified);
  r.setHeader('Accept-Ranges', undefined);
}

/** r.ctx key of a response's SsiFilter. */
const SSI_FILTER = {};

/** $date_local / $date_gmt in the request's `config timefmt` (`%s`: seconds since the epoch). */
function dateVariable(r: HttpRequest, gmt: boolean): string {
  const ctx = r.ctx.get(SSI_CTX) as SsiContext | undefined;
  return strftime(ctx?.timefmt ?? DEFAULT_TIMEFMT, new Date(), gmt);
}

const directives: Directive[] = [
  { name: 'ssi', contexts: HTTP_ANY | Ctx.LIF, args: 'flag', handler: setting(ssiSlot, 'enable', flagArg) },
  { name: 'ssi_silent_errors', contexts: HTTP_ANY, args: 'flag', handler: setting(ssiSlot, 'silentErrors', flagArg) },
  { name: 'ssi_ignore_recycled_buffers', contexts: HTTP_ANY, args: 'flag', handler: setting(ssiSlot, 'ignoreRecycledBuffers', flagArg) },
  { name: 'ssi_last_modified', contexts: HTTP_ANY, args: 'flag', handler: setting(ssiSlot, 'lastModified', flagArg) },
  { name: 'ssi_min_file_chunk', contexts: HTTP_ANY, args: 1, handler: setting(ssiSlot, 'minFileChunk', sizeArg) },
  { name: 'ssi_value_length', contexts: HTTP_ANY, args: 1, handler: setting(ssiSlot, 'valueLen', sizeArg) },
  typesDirective('ssi_types', ssiSlot),
];

export const ssiModule: HttpModule = {
  name: 'ngx_http_ssi_filter_module',
  directives,
  variables: [
    { name: 'date_local', noCache: true, get: (r) => dateVariable(r, false) },
    { name: 'date_gmt', noCache: true, get: (r) => dateVariable(r, true) },
  ],
  postconfiguration(http) {
    // nginx's ssi filter position (see http-conf.ts): after sub (900), before postpone and gzip (1500);
    // the postponed output (nginx's 1400) is part of the SSI body filter here
    const body = http.addBodyFilter(1300, (r, chunk, eof) => (r.ctx.get(SSI_FILTER) as SsiFilter).write(chunk, eof),
      (r) => (r.ctx.get(SSI_FILTER) as SsiFilter).resume());
    http.addHeaderFilter(1300, (r) => ssiHeaderFilter(r, body), { subrequests: true });
  },
};

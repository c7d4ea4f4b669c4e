/**
 * ngx_http_brotli_static_module (google/ngx_brotli; Debian's
 * libnginx-mod-http-brotli-static): `brotli_static on | off | always`. For
 * GET and HEAD of a file, a precompressed `file.br` beside it is sent
 * instead, with `Content-Encoding: br` and the original's type: with `on`
 * to a client's request whose Accept-Encoding names `br` (the filter's
 * check; then `Vary: Accept-Encoding` with gzip_vary once a .br exists, as
 * Debian's 1.0.0rc has it), with `always` to every
 * client; not in byte ranges (ngx_brotli does not allow them). Without a
 * .br the next content handler answers (gzip_static, then the static module).
 */
import { defineSlot, inheritUnset } from '../../../conf/context.ts';
import { HTTP_ANY } from '../../../conf/directive.ts';
import { setting } from '../../../conf/setters.ts';
import { enumOf } from '../../../conf/values.ts';
import { DECLINED } from '../../http-conf.ts';
import type { HttpModule } from '../../http-conf.ts';
import type { HttpRequest } from '../../request.ts';
import { markGzipVary } from '../gzip.ts';
import { openPrecompressed, sendPrecompressed } from '../gzip-static.ts';
import { acceptsBr } from './filter.ts';

interface BrotliStaticConf {
  mode?: 'off' | 'on' | 'always';
}

const brotliStaticSlot = defineSlot<BrotliStaticConf, { mode: 'off' }>('brotli_static', () => ({}), inheritUnset, { mode: 'off' });

async function brotliStaticHandler(r: HttpRequest): Promise<number> {
  if (r.method !== 'GET' && r.method !== 'HEAD') return DECLINED;
  if (r.uri.endsWith('/')) return DECLINED;
  const { mode } = r.level.get(brotliStaticSlot);
  if (mode === 'off') return DECLINED;
  if (mode === 'on') {
    if (r.parent !== undefined || !acceptsBr(r.header('accept-encoding'))) return DECLINED;
  }
  const opened = await openPrecompressed(r, '.br');
  if (opened === undefined) return DECLINED;
  if (mode === 'on') markGzipVary(r);
  return sendPrecompressed(r, opened, 'br', false);
}

export const brotliStaticModule: HttpModule = {
  name: 'ngx_http_brotli_static_module',
  directives: [
    { name: 'brotli_static', contexts: HTTP_ANY, args: 1, handler: setting(brotliStaticSlot, 'mode', enumOf(['off', 'on', 'always'])) },
  ],
  postconfiguration(http) {
    // a module loaded after nginx's own: its content handler runs before theirs (gzip_static is 250)
    http.addPhaseHandler('CONTENT', 240, brotliStaticHandler);
  },
};

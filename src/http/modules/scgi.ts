/**
 * ngx_http_scgi_module: `scgi_pass` to an SCGI server on the upstream
 * engine. The request is a netstring of NUL-terminated names and values —
 * CONTENT_LENGTH first (the body's length, 0 without one), then the params
 * and the request headers as `HTTP_*` — then the body as is. The answer is
 * read by the CGI family's plain protocol (cgi-upstream/plain-protocol.ts).
 */
import { defineSlot } from '../../conf/context.ts';
import type { HttpMainConf, HttpModule } from '../http-conf.ts';
import { CGI_DEFAULTS, mergeCgi } from './cgi-upstream/conf.ts';
import type { CgiLocConf, CgiSlot } from './cgi-upstream/conf.ts';
import { cgiDirectives, cgiHandler, finishCgi } from './cgi-upstream/module.ts';
import { cacheSlot } from './upstream-cache/directives.ts';
import type { CgiModuleSpec } from './cgi-upstream/module.ts';
import { plainCgiProtocol } from './cgi-upstream/plain-protocol.ts';

const scgiLoc = defineSlot<CgiLocConf, typeof CGI_DEFAULTS>('scgi_loc', () => ({}), mergeCgi, CGI_DEFAULTS);

const spec: CgiModuleSpec<CgiLocConf> = {
  prefix: 'scgi_',
  schema: 'scgi://',
  cache: cacheSlot('scgi_'),
  slot: scgiLoc as CgiSlot<CgiLocConf>,
  protocol: plainCgiProtocol,
  streamsChunked: false,
  head(_r, _conf, params, body) {
    let s = `CONTENT_LENGTH\0${body ? body.length : 0}\0`;
    for (const p of params) s += p + '\0';
    return `${s.length}:${s},`;
  },
};

export const scgiModule: HttpModule = {
  name: 'ngx_http_scgi_module',
  directives: cgiDirectives(spec, cgiHandler(spec)),
  postconfiguration: (http: HttpMainConf, cf) => finishCgi(spec, http, cf),
};

/**
 * ngx_http_uwsgi_module: `uwsgi_pass` to a uWSGI server on the upstream
 * engine. The request is the uwsgi packet: a 4-byte header (modifier1, the
 * vars' size as 16-bit little endian, modifier2) and the vars (the params,
 * then the request headers as `HTTP_*`), each name and value preceded by
 * its 16-bit little-endian length; the body follows as is. The answer is
 * read by the CGI family's plain protocol (cgi-upstream/plain-protocol.ts).
 * `uwsgi_pass suwsgi://…` speaks it over TLS with the uwsgi_ssl_* settings.
 */
import { defineSlot } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { setting } from '../../conf/setters.ts';
import type { HttpMainConf, HttpModule } from '../http-conf.ts';
import { requestLog } from '../request-log.ts';
import { upstreamSslDirectives } from '../upstream/directives.ts';
import { CGI_DEFAULTS, CGI_HIDDEN, mergeCgi } from './cgi-upstream/conf.ts';
import type { CgiLocConf, CgiSlot } from './cgi-upstream/conf.ts';
import { cgiDirectives, cgiHandler, finishCgi } from './cgi-upstream/module.ts';
import { cacheSlot } from './upstream-cache/directives.ts';
import type { CgiModuleSpec } from './cgi-upstream/module.ts';
import { plainCgiProtocol } from './cgi-upstream/plain-protocol.ts';

interface UwsgiLocConf extends CgiLocConf {
  modifier1?: number;
  modifier2?: number;
}

const UWSGI_DEFAULTS = { ...CGI_DEFAULTS, modifier1: 0, modifier2: 0 } as const satisfies UwsgiLocConf;

const uwsgiLoc = defineSlot<UwsgiLocConf, typeof UWSGI_DEFAULTS>('uwsgi_loc', () => ({}), mergeCgi, UWSGI_DEFAULTS);

/** A 16-bit little-endian length, as a latin1 string. */
const le16 = (n: number) => String.fromCharCode(n & 0xff, n >> 8);

const spec: CgiModuleSpec<UwsgiLocConf> = {
  prefix: 'uwsgi_',
  schema: 'uwsgi://',
  urlSchemes: { 'uwsgi://': false, 'suwsgi://': true },
  tlsSchema: 'suwsgi://',
  // ngx_http_uwsgi_hide_headers has no Status: a CGI-style answer's Status field reaches the client
  hidden: CGI_HIDDEN.filter((h) => h !== 'status'),
  cache: cacheSlot('uwsgi_'),
  slot: uwsgiLoc as CgiSlot<UwsgiLocConf>,
  protocol: plainCgiProtocol,
  streamsChunked: false,
  head(r, conf, params) {
    let vars = '';
    for (const p of params) vars += le16(p.length) + p;
    if (vars.length > 65535) {
      requestLog(r).error(`uwsgi request is too big: ${vars.length}`);
      return 500;
    }
    const c = r.level.get(uwsgiLoc);
    return String.fromCharCode(c.modifier1) + le16(vars.length) + String.fromCharCode(c.modifier2) + vars;
  },
};

/** uwsgi_modifier1/2: 0–255 (ngx_conf_set_num_slot with nginx's bounds check). */
function modifier(field: 'modifier1' | 'modifier2'): Directive['handler'] {
  return setting(uwsgiLoc, field, (cf, v) => {
    const n = /^\d+$/.test(v) ? Number(v) : NaN;
    if (Number.isNaN(n)) throw cf.error(`invalid number "${v}"`);
    if (n > 255) throw cf.error(`value must be equal to or less than 255`);
    return n;
  });
}

const directives: Directive[] = [
  ...cgiDirectives(spec, cgiHandler(spec)),
  ...upstreamSslDirectives('uwsgi_', uwsgiLoc),
  { name: 'uwsgi_modifier1', contexts: HTTP_ANY, args: 1, handler: modifier('modifier1') },
  { name: 'uwsgi_modifier2', contexts: HTTP_ANY, args: 1, handler: modifier('modifier2') },
];

export const uwsgiModule: HttpModule = {
  name: 'ngx_http_uwsgi_module',
  directives,
  postconfiguration: (http: HttpMainConf, cf) => finishCgi(spec, http, cf),
};

/**
 * `fastcgi_temp_path`, `uwsgi_temp_path` and `scgi_temp_path`: the one
 * directive of ngx_http_fastcgi_module, ngx_http_uwsgi_module and
 * ngx_http_scgi_module that many configurations write even when they pass
 * nothing to such a backend (distribution nginx.conf files set all three).
 * They are read and checked as nginx does (proxy_temp_path's syntax), and
 * kept for the day those backends are built; nothing uses them yet.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import { setting } from '../../conf/setters.ts';
import { tempPathArg } from '../../conf/values.ts';
import type { HttpModule } from '../http-conf.ts';

interface CgiTempPaths {
  uwsgi?: string;
  scgi?: string;
}

const tempPathsSlot = defineSlot<CgiTempPaths>('cgi-temp-paths', () => ({}), inheritUnset);

export const cgiTempPathsModule: HttpModule = {
  name: 'ngx_http_cgi_temp_paths',
  directives: [
    { name: 'uwsgi_temp_path', contexts: HTTP_ANY, args: [1, 4], handler: setting(tempPathsSlot, 'uwsgi', tempPathArg) },
    { name: 'scgi_temp_path', contexts: HTTP_ANY, args: [1, 4], handler: setting(tempPathsSlot, 'scgi', tempPathArg) },
  ],
};

/**
 * ngx_http_fastcgi_module: `fastcgi_pass` to a FastCGI server (php-fpm)
 * on the upstream engine. The request is BEGIN_REQUEST, the params
 * (`fastcgi_param` lines, then the request headers as `HTTP_*`) and the
 * body in STDIN records (records.ts); the response is read by protocol.ts.
 * `$fastcgi_script_name` and `$fastcgi_path_info` split the URI with
 * fastcgi_split_path_info, and a URI ending in `/` gets fastcgi_index.
 */
import { flagArg, stringArg } from '../../../conf/values.ts';
import { HTTP_ANY } from '../../../conf/directive.ts';
import type { Directive } from '../../../conf/directive.ts';
import { listOf, setting } from '../../../conf/setters.ts';
import { compileRegex } from '../../../core/regex.ts';
import type { HttpMainConf, HttpModule, HttpVariable } from '../../http-conf.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { cgiDirectives, cgiHandler, finishCgi } from '../cgi-upstream/module.ts';
import { cacheSlot } from '../upstream-cache/directives.ts';
import type { CgiModuleSpec } from '../cgi-upstream/module.ts';
import { fastcgiLoc } from './conf.ts';
import type { FastcgiLocConf } from './conf.ts';
import { fastcgiProtocol } from './protocol.ts';
import { beginRequest, encodePairs, PARAMS, record, STDIN_FRAMING } from './records.ts';

const spec: CgiModuleSpec<FastcgiLocConf> = {
  prefix: 'fastcgi_',
  schema: 'fastcgi://',
  cache: cacheSlot('fastcgi_'),
  slot: fastcgiLoc,
  protocol: fastcgiProtocol,
  framing: STDIN_FRAMING,
  streamsChunked: true,
  head(r, conf, params, body) {
    const pairs = Buffer.from(encodePairs(params), 'latin1');
    if (pairs.length > 65535) {
      requestLog(r).alert(`fastcgi request record is too big: ${pairs.length}`);
      return 500;
    }
    const parts = [beginRequest(conf.keepConn === true), ...record(PARAMS, pairs), ...record(PARAMS, Buffer.alloc(0))];
    // without a body the empty STDIN record closes the request; with one, the sender closes it
    if (!body) parts.push(STDIN_FRAMING.end);
    return Buffer.concat(parts).toString('latin1');
  },
};

/** The URI split by fastcgi_split_path_info, kept per request while the URI is the same. */
const SPLIT = {};

function split(r: HttpRequest): { uri: string; scriptName: string; pathInfo: string } {
  const cached = r.ctx.get(SPLIT) as { uri: string; scriptName: string; pathInfo: string } | undefined;
  if (cached && cached.uri === r.uri) return cached;
  const re = r.level.get(fastcgiLoc).splitPathInfo;
  const m = re ? re.regex.exec(r.uri) : null;
  const s = { uri: r.uri, scriptName: m ? m[1] ?? '' : r.uri, pathInfo: m ? m[2] ?? '' : '' };
  r.ctx.set(SPLIT, s);
  return s;
}

const variables: HttpVariable[] = [
  {
    name: 'fastcgi_script_name', noCache: true,
    get(r) {
      const name = split(r).scriptName;
      const index = r.level.get(fastcgiLoc).index;
      return index && name.endsWith('/') ? name + index : name;
    },
  },
  { name: 'fastcgi_path_info', noCache: true, get: (r) => split(r).pathInfo },
];

const directives: Directive[] = [
  ...cgiDirectives(spec, cgiHandler(spec)),
  { name: 'fastcgi_index', contexts: HTTP_ANY, args: 1, handler: setting(fastcgiLoc, 'index', stringArg) },
  {
    name: 'fastcgi_split_path_info', contexts: HTTP_ANY, args: 1,
    handler: setting(fastcgiLoc, 'splitPathInfo', (cf, pattern) => {
      const re = compileRegex(cf, pattern);
      if (re.captures !== 2) throw cf.error(`pattern "${pattern}" must have 2 captures`);
      return re;
    }),
  },
  { name: 'fastcgi_keep_conn', contexts: HTTP_ANY, args: 'flag', handler: setting(fastcgiLoc, 'keepConn', flagArg) },
  { name: 'fastcgi_catch_stderr', contexts: HTTP_ANY, args: 1, handler: listOf(fastcgiLoc, 'catchStderr', (_cf, node) => node.args[0]) },
];

export const fastcgiModule: HttpModule = {
  name: 'ngx_http_fastcgi_module',
  directives,
  variables,
  postconfiguration: (http: HttpMainConf, cf) => finishCgi(spec, http, cf),
};

/**
 * ngx_http_auth_request_module: `auth_request uri|off` asks a subrequest
 * whether the request may go on, in the access phase (so `satisfy any|all`
 * combines it with allow/deny and auth_basic, which run before it). A 2xx
 * answer allows; 401 and 403 are the client's answer (a 401 with the
 * subrequest's WWW-Authenticate headers); any other status is a 500.
 * `auth_request_set $var value` evaluates `value` in the subrequest (its
 * `$upstream_http_*`, `$sent_http_*`) once it is done and keeps it for the
 * request, across internal redirects.
 *
 * The subrequest is a GET whose response body is thrown away (nginx's
 * header_only); like every subrequest it skips the access phase.
 */
import { Writable } from 'node:stream';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { listOf, setting } from '../../conf/setters.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { DECLINED, DONE, OK, httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { createSubrequest } from '../subrequest.ts';
import { logSubrequest } from '../phases.ts';

interface AuthSet {
  index: number;
  value: ComplexValue<HttpRequest>;
}

interface AuthRequestConf {
  /** The subrequest's URI; '' for `auth_request off`. */
  uri?: string;
  sets?: AuthSet[];
}

const authRequestSlot = defineSlot<AuthRequestConf>('auth_request', () => ({}), inheritUnset);

/** A subrequest sink that keeps nothing: only the status and headers count. */
function discardSink(): Writable {
  return new Writable({ write(_chunk, _enc, cb) { cb(); } });
}

/** Declines synchronously where auth_request is off (every request passes here). */
function authRequestHandler(r: HttpRequest): number | Promise<number> {
  const conf = r.level.get(authRequestSlot);
  if (!conf.uri) return DECLINED;
  return authorize(r, conf.uri, conf.sets);
}

async function authorize(r: HttpRequest, uri: string, sets: AuthSet[] | undefined): Promise<number> {
  const sub = createSubrequest(r, uri, '', { sink: discardSink() });
  if (!sub) return 500;
  const sr = sub.r;
  sub.start();
  const whole = await sub.done;
  logSubrequest(sr);
  // the subrequest was cut short: the client's request ended with it
  if (!whole && r.sink.destroyed) return DONE;
  const vars = r.main.variables;
  // set on the request itself so the values outlive internal redirects
  if (sets) for (const s of sets) vars.assign(r, s.index, s.value.evaluate(sr));
  const status = sr.status;
  if (status === 403) return 403;
  if (status === 401) {
    for (const h of sr.headersOut) {
      if (h.name.toLowerCase() === 'www-authenticate') r.addHeader(h.name, h.value);
    }
    return 401;
  }
  if (status >= 200 && status < 300) return OK;
  requestLog(r).error(`auth request unexpected status: ${status}`);
  return 500;
}

/**
 * `auth_request_set $name value`: the variable is created if needed, and
 * reads as not found until set (ngx_http_auth_request_variable).
 */
function readSet(cf: ConfContext, node: ConfNode): AuthSet {
  const vars = httpMainOf(cf).variables;
  const [target, value] = node.args;
  if (!target.startsWith('$')) throw cf.error(`invalid variable name "${target}"`);
  const name = target.slice(1);
  const def = vars.lookup(name);
  if (def && !def.prefix) {
    if (!def.changeable && !def.set) throw cf.error(`the duplicate "${name}" variable`);
  } else {
    vars.define({ name, get: () => undefined, changeable: true });
  }
  return { index: vars.index(name), value: compileComplex(cf, vars, value) };
}

export const authRequestModule: HttpModule = {
  name: 'ngx_http_auth_request_module',
  directives: [
    { name: 'auth_request', contexts: HTTP_ANY, args: 1, handler: setting(authRequestSlot, 'uri', (_cf, v) => (v === 'off' ? '' : v)) },
    { name: 'auth_request_set', contexts: HTTP_ANY, args: 2, handler: listOf(authRequestSlot, 'sets', readSet) },
  ],
  postconfiguration(http) {
    // after allow/deny (100) and auth_basic (200): nginx's module list puts auth_request before them,
    // and each phase runs its handlers from the last registered
    http.addPhaseHandler('ACCESS', 250, authRequestHandler);
  },
};

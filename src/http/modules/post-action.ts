/**
 * post_action (a directive of nginx's core module, ngx_http_post_action):
 * once a request's response is done, the request runs again at this URI
 * (or `@name`d location) for its side effects, a proxied notification say:
 * its head and body go nowhere, and the access log line is written for it,
 * as nginx logs the request after its post action was started.
 *
 * Done where Gatehouse ends a request, its log phase, ahead of every log
 * handler. nginx holds the client connection until the post action ends;
 * here the connection goes on (or closes) at once while the post action
 * runs on its own.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { setting } from '../../conf/setters.ts';
import { stringArg } from '../../conf/values.ts';
import { OK } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import { internalRedirect, namedLocation } from '../phases.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';

interface PostActionConf {
  action?: string;
}

const postActionSlot = defineSlot<PostActionConf, object>('post_action', () => ({}), inheritUnset, {});

/** Requests whose post action was started (nginx's r->post_action). */
const started = new WeakSet<HttpRequest>();

function postAction(r: HttpRequest): number {
  const action = r.level.get(postActionSlot).action;
  if (action === undefined || r.parent !== undefined || started.has(r)) return OK;
  started.add(r);
  // the log phase and the connection do not wait for it: it must not count as the client's response ending
  r.finished = false;
  const run = action[0] === '/' ? internalRedirect(r, action) : namedLocation(r, action);
  run.catch((err: Error) => requestLog(r).error(`post action "${action}" failed: ${err.message}`));
  return OK;
}

const directives: Directive[] = [
  { name: 'post_action', contexts: HTTP_ANY | Ctx.LIF, args: 1, handler: setting(postActionSlot, 'action', stringArg) },
];

export const postActionModule: HttpModule = {
  name: 'ngx_http_post_action',
  directives,
  postconfiguration(http) {
    // before every log handler (log_by_lua 50, the gateway 90, the access log 100): they see the post action's URI
    http.addPhaseHandler('LOG', 10, postAction);
  },
};

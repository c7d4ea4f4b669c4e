/**
 * ngx_http_access_module: `allow` and `deny` with addresses, CIDR blocks,
 * `unix:` and `all`, checked in order; the first match decides. A level
 * with its own rules inherits none. Works with `satisfy` (core, see the
 * access phase in phases.ts).
 */
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { addressBytes, matches, parseRule } from '../../core/inet.ts';
import type { Rule } from '../../core/inet.ts';
import { DECLINED, OK } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { coreLoc } from '../core/settings.ts';

interface AccessConf {
  rules?: Rule[];
}

const accessSlot = defineSlot<AccessConf>('access', () => ({}), (parent, child) => {
  child.rules ??= parent.rules;
});

function accessHandler(r: HttpRequest): number {
  const rules = r.level.get(accessSlot).rules;
  if (!rules) return DECLINED;
  const remote = r.remoteAddress;
  let family: 4 | 6 | 'unix';
  let addr: Uint8Array | undefined;
  if (remote.startsWith('unix:')) family = 'unix';
  else {
    addr = addressBytes(remote);
    family = addr?.length === 4 ? 4 : 6;
  }
  for (const rule of rules) {
    if (!matches(rule, family, addr)) continue;
    if (!rule.deny) return OK;
    if ((r.level.get(coreLoc).satisfy ?? 'all') === 'all') requestLog(r).error('access forbidden by rule');
    return 403;
  }
  return DECLINED;
}

function ruleDirective(deny: boolean) {
  return (cf: ConfContext, node: ConfNode): undefined => {
    const c = cf.get(accessSlot);
    if (!Object.hasOwn(c, 'rules') || c.rules === undefined) c.rules = [];
    c.rules.push(parseRule(cf, node, deny));
    return undefined;
  };
}

export const accessModule: HttpModule = {
  name: 'ngx_http_access_module',
  directives: [
    { name: 'allow', contexts: HTTP_ANY | Ctx.LMT, args: 1, handler: ruleDirective(false) },
    { name: 'deny', contexts: HTTP_ANY | Ctx.LMT, args: 1, handler: ruleDirective(true) },
  ],
  postconfiguration(http) {
    // nginx's access phase: access (allow/deny) before auth_basic
    http.addPhaseHandler('ACCESS', 100, accessHandler);
  },
};

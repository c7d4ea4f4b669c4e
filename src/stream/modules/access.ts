/**
 * ngx_stream_access_module: `allow` and `deny` (addresses, CIDR blocks,
 * `unix:`, `all`) checked in order in the access phase; the first match
 * decides, and a denied client is closed with `$status` 403. A server with
 * rules of its own inherits none. Rules are parsed and matched by the http
 * access module's code.
 */
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { LogLevel } from '../../core/error-log.ts';
import { addressBytes, matches, parseRule } from '../../core/inet.ts';
import type { Rule } from '../../core/inet.ts';
import { DECLINED, OK, Status } from '../conf.ts';
import type { StreamModule } from '../conf.ts';
import type { StreamSession } from '../session.ts';

const accessSrv = defineSlot<{ rules?: Rule[] }>('stream_access_srv', () => ({}), (parent, child) => {
  child.rules ??= parent.rules;
});

function accessHandler(s: StreamSession): number {
  const rules = s.level.get(accessSrv).rules;
  if (!rules) return DECLINED;
  let family: 4 | 6 | 'unix' = 'unix';
  let addr: Uint8Array | undefined;
  if (s.listen.spec.path === undefined) {
    addr = addressBytes(s.remoteAddress);
    family = addr?.length === 4 ? 4 : 6;
  }
  for (const rule of rules) {
    if (!matches(rule, family, addr)) continue;
    if (!rule.deny) return OK;
    s.error(LogLevel.error, 'access forbidden by rule');
    return Status.FORBIDDEN;
  }
  return DECLINED;
}

function ruleDirective(deny: boolean) {
  return (cf: ConfContext, node: ConfNode): undefined => {
    (cf.get(accessSrv).rules ??= []).push(parseRule(cf, node, deny));
    return undefined;
  };
}

export const streamAccessModule: StreamModule = {
  name: 'ngx_stream_access_module',
  directives: [
    { name: 'allow', contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: 1, handler: ruleDirective(false) },
    { name: 'deny', contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: 1, handler: ruleDirective(true) },
  ],
  postconfiguration(stream) {
    stream.addPhaseHandler('ACCESS', accessHandler);
  },
};

/**
 * ua-restriction (apisix/plugins/ua-restriction.lua), in the access phase:
 * each User-Agent (trimmed; a repeated header counts each) is searched with
 * the `allowlist` or `denylist` PCRE rules. With an allowlist one matching
 * User-Agent passes the request; with a denylist one matching User-Agent
 * refuses it. Refused, or no User-Agent without `bypass_missing`: 403
 * `{"message": message}`.
 */
import { compile, compileError } from '../../lua/re.ts';
import type { GatewayPlugin } from './registry.ts';

interface UaRestrictionConf { bypass_missing: boolean; allowlist?: string[]; denylist?: string[]; message: string }

const RULES = { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } };

function found(userAgent: string, rules: string[]): boolean {
  const ua = userAgent.trim();
  return rules.some((rule) => {
    const re = compile(rule, 'jo').regex;
    re.lastIndex = 0;
    return re.test(ua);
  });
}

export const uaRestriction: GatewayPlugin<UaRestrictionConf> = {
  name: 'ua-restriction', version: 0.1, priority: 2999,
  schema: {
    type: 'object',
    properties: {
      bypass_missing: { type: 'boolean', default: false },
      allowlist: RULES,
      denylist: RULES,
      message: { type: 'string', minLength: 1, maxLength: 1024, default: 'Not allowed' },
    },
    oneOf: [{ required: ['allowlist'] }, { required: ['denylist'] }],
  },
  checkConf(conf) {
    for (const rule of [...conf.allowlist ?? [], ...conf.denylist ?? []]) {
      const err = compileError(rule, 'j');
      if (err) return err;
    }
    return undefined;
  },
  access(conf, ctx) {
    const agents = ctx.headerValues('user-agent');
    if (agents.length === 0) return conf.bypass_missing ? undefined : { status: 403, body: { message: conf.message } };
    const passed = conf.allowlist
      ? agents.some((ua) => found(ua, conf.allowlist!))
      : !agents.some((ua) => found(ua, conf.denylist!));
    return passed ? undefined : { status: 403, body: { message: conf.message } };
  },
};

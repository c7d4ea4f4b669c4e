/**
 * uri-blocker (apisix/plugins/uri-blocker.lua), in the rewrite phase: a
 * `$request_uri` (as sent: path and arguments, not decoded) that one of the
 * `block_rules` (PCRE, joined with `|`, `(?i)` first with
 * `case_insensitive`) finds gets `rejected_code` (403), with
 * `{"error_msg": rejected_msg}` when there is one, else nginx's page.
 */
import { compile, compileError } from '../../lua/re.ts';
import type { GatewayPlugin } from './registry.ts';

interface UriBlockerConf { block_rules: string[]; rejected_code: number; rejected_msg?: string; case_insensitive: boolean }

// per conf object, as APISIX keeps block_rules_concat on the conf
const joined = new WeakMap<UriBlockerConf, RegExp>();

function blockRegex(conf: UriBlockerConf): RegExp {
  let re = joined.get(conf);
  if (!re) {
    const source = (conf.case_insensitive ? '(?i)' : '') + conf.block_rules.join('|');
    joined.set(conf, (re = compile(source, 'jo').regex));
  }
  return re;
}

export const uriBlocker: GatewayPlugin<UriBlockerConf> = {
  name: 'uri-blocker', version: 0.1, priority: 2900,
  schema: {
    type: 'object',
    properties: {
      block_rules: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 4096 }, uniqueItems: true },
      rejected_code: { type: 'integer', minimum: 200, default: 403 },
      rejected_msg: { type: 'string', minLength: 1 },
      case_insensitive: { type: 'boolean', default: false },
    },
    required: ['block_rules'],
  },
  checkConf(conf) {
    for (const rule of conf.block_rules) {
      const err = compileError(rule, 'j');
      if (err) return err;
    }
    return undefined;
  },
  rewrite(conf, ctx) {
    const uri = ctx.variable('request_uri') ?? '';
    const re = blockRegex(conf);
    re.lastIndex = 0;
    if (!re.test(uri)) return undefined;
    return conf.rejected_msg !== undefined ? { status: conf.rejected_code, body: { error_msg: conf.rejected_msg } } : { status: conf.rejected_code };
  },
};

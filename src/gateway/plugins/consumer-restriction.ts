/**
 * consumer-restriction (apisix/plugins/consumer-restriction.lua): by the
 * request's `type` value (the authenticated consumer's name, the route id,
 * the service id), `blacklist` refuses, `whitelist` admits only its own,
 * `allowed_by_methods` admits a user only for its methods; refused:
 * `rejected_code` (403) `{"message":"The consumer_name is forbidden."}` or
 * `rejected_msg`. No value (no consumer yet, or one in no group for
 * `consumer_group_id`): 401.
 */
import type { PluginContext } from './phase-api.ts';
import type { GatewayPlugin } from './registry.ts';

interface ConsumerRestrictionConf {
  type: string; blacklist?: string[]; whitelist?: string[];
  allowed_by_methods?: Array<{ user?: string; methods?: string[] }>;
  rejected_code: number; rejected_msg?: string;
}

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'CONNECT', 'TRACE', 'PURGE'];

function valueOf(type: string, ctx: PluginContext): string | undefined {
  switch (type) {
    case 'consumer_name': return ctx.consumer?.username;
    case 'route_id': return ctx.route?.id;
    case 'consumer_group_id': return ctx.consumer?.groupId;
    case 'service_id': return ctx.route?.conf.service_id === undefined ? undefined : String(ctx.route.conf.service_id);
    default: return undefined;
  }
}

function methodAllowed(rules: NonNullable<ConsumerRestrictionConf['allowed_by_methods']>, method: string, user: string): boolean {
  const rule = rules.find((x) => x.user === user);
  return rule === undefined || (rule.methods ?? []).includes(method);
}

export const consumerRestriction: GatewayPlugin<ConsumerRestrictionConf> = {
  name: 'consumer-restriction', version: 0.1, priority: 2400,
  schema: {
    type: 'object',
    properties: {
      type: { type: 'string', enum: ['consumer_name', 'service_id', 'route_id', 'consumer_group_id'], default: 'consumer_name' },
      blacklist: { type: 'array', minItems: 1, items: { type: 'string' } },
      whitelist: { type: 'array', minItems: 1, items: { type: 'string' } },
      allowed_by_methods: {
        type: 'array',
        items: { type: 'object', properties: { user: { type: 'string' }, methods: { type: 'array', minItems: 1, items: { type: 'string', enum: METHODS } } } },
      },
      rejected_code: { type: 'integer', minimum: 200, default: 403 },
      rejected_msg: { type: 'string' },
    },
    anyOf: [{ required: ['blacklist'] }, { required: ['whitelist'] }, { required: ['allowed_by_methods'] }],
  },
  access(conf, ctx) {
    const value = valueOf(conf.type, ctx);
    if (value === undefined) return { status: 401, body: { message: `The request is rejected, please check the ${conf.type} for this request` } };
    const reject = { status: conf.rejected_code, body: { message: conf.rejected_msg ?? `The ${conf.type} is forbidden.` } };
    if (conf.blacklist?.includes(value)) return reject;
    const whitelisted = conf.whitelist?.includes(value) ?? false;
    let block = conf.whitelist !== undefined && !whitelisted;
    if (conf.allowed_by_methods?.length && !whitelisted && !methodAllowed(conf.allowed_by_methods, ctx.method, value)) block = true;
    return block ? reject : undefined;
  },
};

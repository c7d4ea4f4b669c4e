/**
 * ip-restriction (apisix/plugins/ip-restriction/init.lua): a client
 * address in `blacklist`, or outside `whitelist`, gets `response_code`
 * (403) with `{"message": message}`.
 */
import { cidrMatch, clientAddrOf, parseCidr } from '../../core/inet.ts';
import type { Cidr } from '../../core/inet.ts';
import type { GatewayPlugin } from './registry.ts';

interface IpRestrictionConf { whitelist?: string[]; blacklist?: string[]; message: string; response_code: number }

const nets = new WeakMap<string[], Cidr[]>();

function netsOf(list: string[]): Cidr[] {
  let n = nets.get(list);
  if (!n) nets.set(list, (n = list.map((x) => parseCidr(x)).filter((c): c is Cidr => c !== undefined)));
  return n;
}

const IP_LIST = { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } };

export const ipRestriction: GatewayPlugin<IpRestrictionConf> = {
  name: 'ip-restriction', version: 0.1, priority: 3000,
  schema: {
    type: 'object',
    properties: {
      message: { type: 'string', minLength: 1, maxLength: 1024, default: 'Your IP address is not allowed' },
      response_code: { type: 'integer', minimum: 403, maximum: 404, default: 403 },
      whitelist: IP_LIST,
      blacklist: IP_LIST,
    },
    oneOf: [{ required: ['whitelist'] }, { required: ['blacklist'] }],
  },
  access(conf, ctx) {
    const client = clientAddrOf(ctx.variable('remote_addr') ?? '', 0);
    let block = false;
    if (conf.blacklist) block = cidrMatch(client, netsOf(conf.blacklist));
    if (conf.whitelist) block = !cidrMatch(client, netsOf(conf.whitelist));
    return block ? { status: conf.response_code, body: { message: conf.message } } : undefined;
  },
};

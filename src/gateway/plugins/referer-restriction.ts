/**
 * referer-restriction (apisix/plugins/referer-restriction.lua), in the
 * access phase: the host of the Referer (as lua-resty-http's parse_uri
 * takes it: `http(s)://` or `//`, then up to `:`, `/` or `?`) is checked
 * against `whitelist` or `blacklist` (exact hosts, or `*.suffix`: any host
 * ending in `.suffix`). Refused, or no Referer (a malformed one counts as
 * none) without `bypass_missing`: 403 `{"message": message}`.
 */
import { HOST_PATTERN } from '../schema/resources.ts';
import type { GatewayPlugin } from './registry.ts';

interface RefererRestrictionConf { bypass_missing: boolean; whitelist?: string[]; blacklist?: string[]; message: string }

const HOSTS = { type: 'array', items: { type: 'string', pattern: HOST_PATTERN }, minItems: 1 };
const URI = /^(?:(https?):)?\/\/((?:[^[\]:/?]+)|(?:\[.+\]))(?::(\d+))?([^?]*)\??(.*)/;

interface Matcher { exact: Set<string>; suffixes: string[] }

const matchers = new WeakMap<string[], Matcher>();

function matches(hosts: string[], host: string): boolean {
  let m = matchers.get(hosts);
  if (!m) {
    m = { exact: new Set(), suffixes: [] };
    for (const h of hosts) {
      if (h.startsWith('*')) m.suffixes.push(h.slice(1));
      else m.exact.add(h);
    }
    matchers.set(hosts, m);
  }
  return m.exact.has(host) || m.suffixes.some((s) => host.endsWith(s));
}

export const refererRestriction: GatewayPlugin<RefererRestrictionConf> = {
  name: 'referer-restriction', version: 0.1, priority: 2990,
  schema: {
    type: 'object',
    properties: {
      bypass_missing: { type: 'boolean', default: false },
      whitelist: HOSTS,
      blacklist: HOSTS,
      message: { type: 'string', minLength: 1, maxLength: 1024, default: 'Your referer host is not allowed' },
    },
    oneOf: [{ required: ['whitelist'] }, { required: ['blacklist'] }],
  },
  access(conf, ctx) {
    const referer = ctx.variable('http_referer');
    const host = referer === undefined ? undefined : URI.exec(referer)?.[2];
    let block: boolean;
    if (host === undefined) block = !conf.bypass_missing;
    else if (conf.whitelist) block = !matches(conf.whitelist, host);
    else block = matches(conf.blacklist!, host);
    return block ? { status: 403, body: { message: conf.message } } : undefined;
  },
};

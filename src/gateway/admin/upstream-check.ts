/**
 * An upstream's checks beyond its schema (apisix/upstream.lua
 * check_upstream_conf), for the upstreams collection and for an `upstream`
 * inside a route, service or stream route.
 */
import { isIPv6 } from 'node:net';
import { validate } from '../schema/validate.ts';
import { UPSTREAM_HASH_HEADER, UPSTREAM_HASH_VARS } from '../schema/resources.ts';
import type { AdminContext } from './context.ts';
import type { Keyring } from '../data-encryption.ts';

/**
 * `tls.client_key` stored encrypted, as apisix/upstream.lua encrypt_conf (for an upstream and
 * the `upstream` of a route, service or stream route); a stored (already encrypted) key, which
 * a PATCH merges back in, is left alone: a PEM key starts with `---`.
 */
export function encryptUpstreamKey(u: unknown, keyring: Keyring): void {
  const t = (u as { tls?: { client_key?: unknown } } | undefined)?.tls;
  if (typeof t?.client_key === 'string' && t.client_key.startsWith('---')) t.client_key = keyring.encrypt(t.client_key);
}

/** The port of `host:port` / `[v6]:port`, if any. */
function portOf(addr: string): number | undefined {
  const m = /^\[[^\]]*\]:(\d+)$/.exec(addr) ?? (/^[^:]*:(\d+)$/.exec(addr));
  return m ? Number(m[1]) : undefined;
}

export async function checkUpstream(conf: Record<string, unknown>, ctx: AdminContext): Promise<string | undefined> {
  const nodes = conf.nodes;
  if (nodes && !Array.isArray(nodes) && typeof nodes === 'object') {
    for (const addr of Object.keys(nodes)) {
      const port = portOf(addr);
      if (port !== undefined && (port < 1 || port > 65535)) return `invalid port ${port}`;
    }
  }
  if (Array.isArray(nodes)) {
    for (const n of nodes as Array<{ host?: string }>) {
      if (typeof n.host === 'string' && isIPv6(n.host)) {
        return "invalid configuration: IPv6 address must be enclosed with '[' and ']'";
      }
    }
  }
  const tls = conf.tls as { client_cert_id?: unknown } | undefined;
  if (tls?.client_cert_id !== undefined && !ctx.skipReferences) {
    const kv = await ctx.store.get(`${ctx.settings.keyPrefix}/ssls/${tls.client_cert_id}`);
    if (!kv) return `failed to fetch ssl info by ssl id [${tls.client_cert_id}], response code: 404`;
    if ((JSON.parse(kv.value) as { type?: string }).type !== 'client') return `failed to fetch ssl info by ssl id [${tls.client_cert_id}], wrong ssl type`;
  }
  if (conf.pass_host === 'rewrite' && (conf.upstream_host === undefined || conf.upstream_host === '')) {
    return "`upstream_host` can't be empty when `pass_host` is `rewrite`";
  }
  if (conf.type !== 'chash') return undefined;
  const hashOn = (conf.hash_on as string | undefined) ?? 'vars';
  if (hashOn !== 'consumer' && conf.key === undefined) return 'missing key';
  const pattern = hashOn === 'vars' ? UPSTREAM_HASH_VARS : hashOn === 'header' || hashOn === 'cookie' ? UPSTREAM_HASH_HEADER : undefined;
  if (pattern) {
    const err = validate({ type: 'string', pattern }, conf.key);
    if (err) return `invalid configuration: ${err}`;
  }
  return undefined;
}

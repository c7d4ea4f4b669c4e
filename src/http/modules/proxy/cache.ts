/**
 * proxy_cache: the proxy's cache slot and directives (the engine's cache,
 * upstream-cache/, under the `proxy_` prefix) and what the proxy does its
 * own way around it: the default key (`http://` + the proxy_pass host + the
 * URI sent), the conditional and range fields cleared from the request
 * (ngx_http_proxy_cache_headers), proxy_cache_convert_head, and a
 * revalidation's If-Modified-Since / If-None-Match in the request head.
 */
import { upstreamCache } from '../upstream-cache/cache.ts';
import type { CacheProtocol } from '../upstream-cache/protocol.ts';
import { cacheDirectives as cacheRows, cacheSlot } from '../upstream-cache/directives.ts';
import type { UpstreamCache } from '../../upstream/protocol.ts';
import type { DerivedConf, ProxyLoc, ProxyUpstream } from './conf.ts';

export const cacheLoc = cacheSlot('proxy_');

export const cacheDirectives = cacheRows('proxy_', cacheLoc, '$proxy_host');

/** Request fields nginx's proxy_cache clears by default (ngx_http_proxy_cache_headers): the cache wants whole, unconditional responses. */
const CLEARED = ['if-modified-since', 'if-unmodified-since', 'if-none-match', 'if-match', 'range', 'if-range'];

function clearConditionals(u: ProxyUpstream): void {
  const own = u.conf.setHeaders;
  const head = u.head;
  const lines = head.split('\r\n');
  const kept = lines.filter((line, i) => {
    if (i === 0) return true;
    const c = line.indexOf(':');
    if (c <= 0) return true;
    const name = line.slice(0, c).toLowerCase();
    return !CLEARED.includes(name) || (own !== undefined && own.some((h) => h.name.toLowerCase() === name));
  });
  if (kept.length !== lines.length) u.head = kept.join('\r\n');
}

const proxyCacheProtocol: CacheProtocol = {
  prepare(u, c) {
    clearConditionals(u as unknown as ProxyUpstream);
    if (u.isHead && c.convertHead && u.head.startsWith('HEAD ')) {
      // proxy_cache_convert_head: the upstream is asked for the whole response, which can then be stored
      u.head = 'GET ' + u.head.slice(5);
      u.isHead = false;
    }
  },
  // without proxy_cache_key nginx keys by what goes upstream: `http://` + the proxy_pass host + the URI sent
  defaultKey: (u, c) => u.schema + c.defaultKey!.evaluate(u.r) + u.uri,
  revalidate(u, lastModified, etag) {
    let extra = '';
    if (lastModified !== undefined) extra += `If-Modified-Since: ${lastModified}\r\n`;
    if (etag !== undefined) extra += `If-None-Match: ${etag}\r\n`;
    u.head = u.head.slice(0, -2) + extra + '\r\n';
    return true;
  },
};

export const proxyCache: UpstreamCache<ProxyLoc, DerivedConf> = upstreamCache(cacheLoc, proxyCacheProtocol);

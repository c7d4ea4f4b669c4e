/**
 * What a module's protocol tells the upstream cache (cache.ts): how its
 * requests are keyed, prepared and revalidated, and how its head is stored.
 */
import type { MergedConf } from '../../../conf/context.ts';
import type { UpstreamDerived, UpstreamLoc } from '../../upstream/conf.ts';
import type { UpstreamHead } from '../../upstream/protocol.ts';
import type { UpstreamRequest } from '../../upstream/upstream-request.ts';
import type { CacheSlot } from './directives.ts';

/** Any module's exchange, as the cache sees it. */
export type AnyUpstream = UpstreamRequest<UpstreamLoc, UpstreamDerived>;

/** What a module's protocol does its own way around the cache. */
export interface CacheProtocol {
  /** Before the key is looked up (the proxy clears conditional fields and makes a HEAD a GET). */
  prepare?(u: AnyUpstream, c: MergedConf<CacheSlot>): void;
  /** The key when the level has no `*_cache_key` (the proxy's schema, host and URI; the CGI family's empty key); none: no caching. */
  defaultKey?(u: AnyUpstream, c: MergedConf<CacheSlot>): string;
  /** Adds a revalidation's conditional fields to the request; false when the protocol cannot. */
  revalidate?(u: AnyUpstream, lastModified: string | undefined, etag: string | undefined): boolean;
  /** The head as stored; the raw bytes when undefined (an HTTP head as received). */
  storedHead?(head: UpstreamHead, raw: string): string;
}

/** A head as an HTTP/1.1 head, for protocols whose head is not HTTP (CGI fields, FastCGI records). */
export function httpHeadOf(head: UpstreamHead): string {
  let s = `HTTP/1.1 ${head.statusLine || head.status}\r\n`;
  const h = head.headers;
  for (let i = 0; i < h.names.length; i++) s += `${h.names[i]}: ${h.values[i]}\r\n`;
  return s + '\r\n';
}

/**
 * ngx_http_core_module, part 2: the per-location and per-server settings
 * (root, timeouts, limits, redirects, tokens, ...). Most are single-valued:
 * set once per level, inherited downward when unset. Defaults are nginx's.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfContext, MergedConf } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { disableSymlinksDirective } from './disable-symlinks.ts';
import { flagArg, parseSize, parseTime, choiceOf, countArg, msecArg, sizeArg, tempPathArg } from '../../conf/values.ts';
import { parseErrorLog } from '../../core/error-log-args.ts';
import type { ErrorLogSpec } from '../../core/error-log.ts';
import { listOf, setting, unique } from '../../conf/setters.ts';
import type { Parse } from '../../conf/setters.ts';
import { compileDocRoot } from './doc-root.ts';
import type { DocRoot } from './doc-root.ts';

export interface CoreLocConf {
  /** `root` or `alias` (one field: they inherit together); unset means `html` under the prefix. */
  root?: DocRoot;
  defaultType?: string;
  types?: Map<string, string>;
  keepaliveTimeout?: number;
  /** The optional second `keepalive_timeout` value, sent as `Keep-Alive: timeout=N`. */
  keepaliveHeader?: number;
  keepaliveRequests?: number;
  keepaliveTime?: number;
  /** Browsers keepalive is not used with (`keepalive_disable`): `msie6`, `safari`. */
  keepaliveDisable?: readonly string[];
  clientMaxBodySize?: number;
  clientBodyBufferSize?: number;
  clientBodyTimeout?: number;
  clientBodyTempPath?: string;
  clientBodyInFileOnly?: string;
  sendTimeout?: number;
  serverTokens?: 'on' | 'off' | 'build';
  absoluteRedirect?: boolean;
  portInRedirect?: boolean;
  serverNameInRedirect?: boolean;
  logNotFound?: boolean;
  /** `log_subrequest`: subrequests are written to the access log too. */
  logSubrequest?: boolean;
  msiePadding?: boolean;
  msieRefresh?: boolean;
  recursiveErrorPages?: boolean;
  chunkedTransferEncoding?: boolean;
  etag?: boolean;
  ifModifiedSince?: 'off' | 'exact' | 'before';
  /** `satisfy`: whether all access handlers must allow, or any one (access phase). */
  satisfy?: 'all' | 'any';
  /** `auth_delay`: how long a 401 from the access phase is held back, in ms. */
  authDelay?: number;
  maxRanges?: number;
  sendfile?: boolean;
  tcpNodelay?: boolean;
  resolver?: string[];
  /** Every `resolver` argument, `valid=` and `ipv6=` included (the proxy's resolver reads them). */
  resolverArgs?: string[];
  resolverTimeout?: number;
  errorLogs?: ErrorLogSpec[];
  lingeringClose?: 'on' | 'off' | 'always';
  lingeringTime?: number;
  lingeringTimeout?: number;
  resetTimedoutConnection?: boolean;
  /** The most of a subrequest's body kept in memory (SSI's `include ... set=`). */
  subrequestOutputBufferSize?: number;
}


export interface CoreSrvConf {
  clientHeaderBufferSize?: number;
  largeHeaderBuffers?: { count: number; size: number };
  clientHeaderTimeout?: number;
  ignoreInvalidHeaders?: boolean;
  mergeSlashes?: boolean;
  underscoresInHeaders?: boolean;
  /** `max_headers` (nginx 1.29): header lines allowed in a request. */
  maxHeaders?: number;
  /** Only checked against large_client_header_buffers, as nginx does. */
  connectionPoolSize?: number;
}


/** Defaults applied where nothing on the way down set a value. */
export const CORE_LOC_DEFAULTS = {
  defaultType: 'text/plain',
  keepaliveTimeout: 75_000,
  keepaliveRequests: 1000,
  keepaliveTime: 3_600_000,
  keepaliveDisable: ['msie6'],
  clientBodyInFileOnly: 'off',
  clientMaxBodySize: 1024 * 1024,
  clientBodyBufferSize: 16 * 1024,
  clientBodyTimeout: 60_000,
  sendTimeout: 60_000,
  serverTokens: 'on',
  absoluteRedirect: true,
  portInRedirect: true,
  serverNameInRedirect: false,
  logNotFound: true,
  logSubrequest: false,
  msiePadding: true,
  msieRefresh: false,
  recursiveErrorPages: false,
  chunkedTransferEncoding: true,
  etag: true,
  ifModifiedSince: 'exact',
  satisfy: 'all',
  authDelay: 0,
  maxRanges: Infinity,
  resolverTimeout: 30_000,
  lingeringClose: 'on',
  lingeringTime: 30_000,
  lingeringTimeout: 5_000,
  // nginx's default is the page size
  subrequestOutputBufferSize: 4096,
} as const satisfies CoreLocConf;

export const coreLoc = defineSlot<CoreLocConf, typeof CORE_LOC_DEFAULTS>('http_core_loc', () => ({}), inheritUnset, CORE_LOC_DEFAULTS);

export const CORE_SRV_DEFAULTS = {
  clientHeaderBufferSize: 1024,
  largeHeaderBuffers: { count: 4, size: 8192 },
  clientHeaderTimeout: 60_000,
  ignoreInvalidHeaders: true,
  mergeSlashes: true,
  underscoresInHeaders: false,
  maxHeaders: 1000,
  connectionPoolSize: 512,
} as const satisfies CoreSrvConf;

export const coreSrv = defineSlot<CoreSrvConf, typeof CORE_SRV_DEFAULTS>('http_core_srv', () => ({}), inheritUnset, CORE_SRV_DEFAULTS);

/** A single-valued location setting: `name value;`, duplicate on the same level is an error. */
function loc<K extends keyof CoreLocConf>(name: string, field: K, parse: Parse<CoreLocConf[K]>, contexts = HTTP_ANY): Directive {
  return { name, contexts, args: 1, handler: setting(coreLoc, field, parse) };
}

function srv<K extends keyof CoreSrvConf>(name: string, field: K, parse: Parse<CoreSrvConf[K]>): Directive {
  return { name, contexts: Ctx.HTTP | Ctx.SERVER, args: 1, handler: setting(coreSrv, field, parse) };
}

/** Accepted for compatibility; has no effect here (documented in docs/directives.md). */
function accepted(name: string, args: Directive['args'], contexts = HTTP_ANY): Directive {
  return { name, contexts, args, handler: () => undefined };
}

/** Hand-written: root and alias share one field, and each names the other in its duplicate message. */
function rootOrAlias(isAlias: boolean): Directive['handler'] {
  return (cf, node) => {
    const c = cf.get(coreLoc);
    if (c.root !== undefined) {
      if (c.root.isAlias === isAlias) return 'is duplicate';
      return `is duplicate, "${c.root.isAlias ? 'alias' : 'root'}" directive was specified earlier`;
    }
    c.root = compileDocRoot(cf, node.args[0], isAlias);
  };
}

export const httpSettingsDirectives: Directive[] = [
  { name: 'root', contexts: HTTP_ANY | Ctx.LIF, args: 1, handler: rootOrAlias(false) },
  { name: 'alias', contexts: Ctx.LOCATION, args: 1, handler: rootOrAlias(true) },
  loc('default_type', 'defaultType', (_cf, v) => v),
  {
    name: 'keepalive_timeout', contexts: HTTP_ANY, args: [1, 2],
    handler: unique(coreLoc, 'keepaliveTimeout', (cf, node, c) => {
      c.keepaliveTimeout = msecArg(cf, node.args[0]);
      if (node.args[1] !== undefined) c.keepaliveHeader = msecArg(cf, node.args[1]) / 1000;
    }),
  },
  loc('keepalive_requests', 'keepaliveRequests', countArg),
  loc('keepalive_time', 'keepaliveTime', msecArg),
  {
    name: 'keepalive_disable', contexts: HTTP_ANY, args: [1, 2],
    handler: setting(coreLoc, 'keepaliveDisable', (cf, _v, args) => {
      for (const v of args) {
        if (v !== 'none' && v !== 'msie6' && v !== 'safari') throw cf.error(`invalid value "${v}" in "keepalive_disable" directive`);
      }
      return args.filter((v) => v !== 'none');
    }),
  },
  loc('client_max_body_size', 'clientMaxBodySize', sizeArg),
  loc('client_body_buffer_size', 'clientBodyBufferSize', sizeArg),
  loc('client_body_timeout', 'clientBodyTimeout', msecArg),
  { name: 'client_body_temp_path', contexts: HTTP_ANY, args: [1, 4], handler: setting(coreLoc, 'clientBodyTempPath', tempPathArg) },
  loc('client_body_in_file_only', 'clientBodyInFileOnly', choiceOf(['on', 'off', 'clean'])),
  accepted('client_body_in_single_buffer', 'flag'),
  loc('send_timeout', 'sendTimeout', msecArg),
  loc('server_tokens', 'serverTokens', choiceOf(['on', 'off', 'build'])),
  loc('absolute_redirect', 'absoluteRedirect', flagArg),
  loc('port_in_redirect', 'portInRedirect', flagArg),
  loc('server_name_in_redirect', 'serverNameInRedirect', flagArg),
  loc('log_not_found', 'logNotFound', flagArg),
  loc('log_subrequest', 'logSubrequest', flagArg),
  loc('subrequest_output_buffer_size', 'subrequestOutputBufferSize', sizeArg),
  loc('msie_padding', 'msiePadding', flagArg),
  loc('msie_refresh', 'msieRefresh', flagArg),
  loc('recursive_error_pages', 'recursiveErrorPages', flagArg),
  loc('chunked_transfer_encoding', 'chunkedTransferEncoding', flagArg),
  loc('etag', 'etag', flagArg),
  loc('if_modified_since', 'ifModifiedSince', choiceOf(['off', 'exact', 'before'])),
  loc('satisfy', 'satisfy', choiceOf(['all', 'any'])),
  loc('auth_delay', 'authDelay', msecArg),
  loc('max_ranges', 'maxRanges', countArg),
  loc('sendfile', 'sendfile', flagArg, HTTP_ANY | Ctx.LIF),
  loc('tcp_nodelay', 'tcpNodelay', flagArg),
  accepted('tcp_nopush', 'flag'),
  accepted('sendfile_max_chunk', 1),
  accepted('aio', 1),
  accepted('aio_write', 'flag'),
  accepted('directio', 1),
  accepted('directio_alignment', 1),
  accepted('output_buffers', 2),
  accepted('postpone_output', 1),
  accepted('open_file_cache', [1, 2]),
  accepted('open_file_cache_valid', 1),
  accepted('open_file_cache_min_uses', 1),
  accepted('open_file_cache_errors', 'flag'),
  accepted('open_file_cache_events', 'flag'),
  disableSymlinksDirective,
  accepted('server_names_hash_max_size', 1, Ctx.HTTP),
  accepted('server_names_hash_bucket_size', 1, Ctx.HTTP),
  accepted('variables_hash_max_size', 1, Ctx.HTTP),
  accepted('variables_hash_bucket_size', 1, Ctx.HTTP),
  accepted('types_hash_max_size', 1),
  accepted('types_hash_bucket_size', 1),
  accepted('request_pool_size', 1, Ctx.HTTP | Ctx.SERVER),
  srv('connection_pool_size', 'connectionPoolSize', sizeArg),
  accepted('reset_timedout_connection', 'flag'),
  loc('lingering_close', 'lingeringClose', choiceOf(['on', 'off', 'always'])),
  loc('lingering_time', 'lingeringTime', msecArg),
  loc('lingering_timeout', 'lingeringTimeout', msecArg),
  {
    name: 'resolver', contexts: HTTP_ANY, args: [1, Infinity],
    handler: unique(coreLoc, 'resolver', (_cf, node, c) => {
      c.resolver = node.args.filter((a) => !a.includes('='));
      c.resolverArgs = node.args;
    }),
  },
  loc('resolver_timeout', 'resolverTimeout', msecArg),
  {
    name: 'error_log', contexts: HTTP_ANY, args: [1, 2],
    // several error_log lines on one level all apply; a level with its own replaces the parent's
    handler: listOf(coreLoc, 'errorLogs', (cf, node) => parseErrorLog(cf, node.args)),
  },
  srv('client_header_buffer_size', 'clientHeaderBufferSize', sizeArg),
  {
    name: 'large_client_header_buffers', contexts: Ctx.HTTP | Ctx.SERVER, args: 2,
    handler: setting(coreSrv, 'largeHeaderBuffers', (cf, _v, args) => ({ count: countArg(cf, args[0]), size: sizeArg(cf, args[1]) })),
  },
  srv('client_header_timeout', 'clientHeaderTimeout', msecArg),
  srv('ignore_invalid_headers', 'ignoreInvalidHeaders', flagArg),
  srv('merge_slashes', 'mergeSlashes', flagArg),
  srv('underscores_in_headers', 'underscoresInHeaders', flagArg),
  srv('max_headers', 'maxHeaders', countArg),
];

/** nginx's merge-time check of a server's settings; the message of its error, if any. */
export function checkServerSettings(c: MergedConf<typeof coreSrv>): string | undefined {
  if (c.largeHeaderBuffers.size < c.connectionPoolSize) {
    return 'the "large_client_header_buffers" size must be equal to or greater than "connection_pool_size"';
  }
  return undefined;
}

/**
 * ngx_http_fastcgi_module's location configuration: the CGI family's
 * (cgi-upstream/conf.ts) plus fastcgi_index, fastcgi_split_path_info,
 * fastcgi_keep_conn and fastcgi_catch_stderr.
 */
import { defineSlot } from '../../../conf/context.ts';
import type { CompiledRegex } from '../../../core/regex.ts';
import { CGI_DEFAULTS, mergeCgi } from '../cgi-upstream/conf.ts';
import type { CgiLocConf } from '../cgi-upstream/conf.ts';

export interface FastcgiLocConf extends CgiLocConf {
  index?: string;
  splitPathInfo?: CompiledRegex;
  keepConn?: boolean;
  /** fastcgi_catch_stderr strings (a level with its own inherits none). */
  catchStderr?: string[];
}

export const FASTCGI_DEFAULTS = { ...CGI_DEFAULTS, keepConn: false } as const satisfies FastcgiLocConf;

export const fastcgiLoc = defineSlot<FastcgiLocConf, typeof FASTCGI_DEFAULTS>('fastcgi_loc', () => ({}), mergeCgi, FASTCGI_DEFAULTS);

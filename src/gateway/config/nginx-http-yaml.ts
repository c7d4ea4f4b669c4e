/**
 * `nginx_config.http.*` and the configuration snippets of config.yaml: the
 * http-level directives APISIX's nginx.conf template writes from them
 * (apisix/cli/ngx_tpl.lua), with APISIX's defaults (apisix/cli/config.lua):
 * the access log and its format, body size, timeouts, real IP, the
 * upstream group's keepalive, custom shared dicts, and the snippets put
 * verbatim where APISIX puts them.
 */
import { at, bool, ConfigError, isObj, str } from './yaml-values.ts';
import type { Obj } from './yaml-values.ts';

const DEFAULT_ACCESS_LOG_FORMAT = '$remote_addr - $remote_user [$time_local] $http_host "$request" $status $body_bytes_sent $request_time "$http_referer" "$http_user_agent" $upstream_addr $upstream_status $upstream_response_time "$upstream_scheme://$upstream_host$upstream_uri"';

const ESCAPES = ['default', 'json', 'none'];

export interface NginxHttpYaml {
  /** undefined: `enable_access_log: false`. */
  accessLog: { path: string; format: string; escape: string; buffer: string } | undefined;
  clientMaxBodySize: string;
  keepaliveTimeout: string;
  clientHeaderTimeout: string;
  clientBodyTimeout: string;
  sendTimeout: string;
  underscoresInHeaders: string | undefined;
  realIpHeader: string | undefined;
  realIpRecursive: string | undefined;
  realIpFrom: string[];
  /** The `upstream` block every route's tries go through. */
  upstream: { keepalive: string; keepaliveRequests: string; keepaliveTimeout: string };
  /** http.custom_lua_shared_dict: name → size. */
  sharedDicts: Array<[string, string]>;
  snippets: { main: string; http: string; server: string; location: string; admin: string; end: string };
}

function onOff(v: unknown, key: string, def: string | undefined): string | undefined {
  if (v === undefined || v === null) return def;
  if (typeof v === 'boolean') return v ? 'on' : 'off';
  const s = str(v, key, '');
  if (s !== 'on' && s !== 'off') throw new ConfigError(`${key}: expected on or off, got ${JSON.stringify(v)}`);
  return s;
}

function snippet(root: Obj, name: string): string {
  return str(at(root, `nginx_config.${name}`), `nginx_config.${name}`, '');
}

export function nginxHttpOf(root: Obj): NginxHttpYaml {
  const key = (k: string) => `nginx_config.http.${k}`;
  const value = (k: string, def: string) => str(at(root, key(k)), key(k), def);
  const escape = value('access_log_format_escape', 'default');
  if (!ESCAPES.includes(escape)) throw new ConfigError(`${key('access_log_format_escape')}: expected one of ${ESCAPES.join(', ')}, got ${JSON.stringify(escape)}`);
  const realIpFromRaw = at(root, key('real_ip_from'));
  let realIpFrom = ['127.0.0.1', 'unix:'];
  if (realIpFromRaw !== undefined && realIpFromRaw !== null) {
    if (!Array.isArray(realIpFromRaw)) throw new ConfigError(`${key('real_ip_from')}: expected a list of addresses or CIDRs`);
    realIpFrom = realIpFromRaw.map((a, i) => str(a, `${key('real_ip_from')}[${i + 1}]`, ''));
  }
  const dicts = at(root, key('custom_lua_shared_dict'));
  if (dicts !== undefined && dicts !== null && !isObj(dicts)) throw new ConfigError(`${key('custom_lua_shared_dict')}: expected a map of names to sizes`);
  return {
    accessLog: bool(at(root, key('enable_access_log')), key('enable_access_log'), true)
      ? { path: value('access_log', 'logs/access.log'), format: value('access_log_format', DEFAULT_ACCESS_LOG_FORMAT), escape, buffer: value('access_log_buffer', '16384') }
      : undefined,
    clientMaxBodySize: value('client_max_body_size', '0'),
    keepaliveTimeout: value('keepalive_timeout', '60s'),
    clientHeaderTimeout: value('client_header_timeout', '60s'),
    clientBodyTimeout: value('client_body_timeout', '60s'),
    sendTimeout: value('send_timeout', '10s'),
    underscoresInHeaders: onOff(at(root, key('underscores_in_headers')), key('underscores_in_headers'), 'on'),
    realIpHeader: value('real_ip_header', 'X-Real-IP') || undefined,
    realIpRecursive: onOff(at(root, key('real_ip_recursive')), key('real_ip_recursive'), 'off'),
    realIpFrom,
    upstream: {
      keepalive: value('upstream.keepalive', '320'),
      keepaliveRequests: value('upstream.keepalive_requests', '1000'),
      keepaliveTimeout: value('upstream.keepalive_timeout', '60s'),
    },
    sharedDicts: Object.entries(dicts ?? {}).map(([name, size]) => [name, str(size, `${key('custom_lua_shared_dict')}.${name}`, '')]),
    snippets: {
      main: snippet(root, 'main_configuration_snippet'),
      http: snippet(root, 'http_configuration_snippet'),
      server: snippet(root, 'http_server_configuration_snippet'),
      location: snippet(root, 'http_server_location_configuration_snippet'),
      admin: snippet(root, 'http_admin_configuration_snippet'),
      end: snippet(root, 'http_end_configuration_snippet'),
    },
  };
}

/** A snippet's lines indented to `indent`, nothing for an empty one. */
export function snippetLines(text: string, indent: string): string[] {
  if (!text.trim()) return [];
  return text.replace(/\n+$/, '').split('\n').map((l) => (l ? indent + l : l));
}

/** A value in single quotes as nginx reads it (a `'` or `\` escaped). */
function quoted(s: string): string {
  return `'${s.replace(/[\\']/g, (c) => '\\' + c)}'`;
}

/** The http block's directives (ngx_tpl.lua's order), before the servers. */
export function nginxHttpLines(h: NginxHttpYaml): string[] {
  const lines: string[] = [];
  for (const [name, size] of h.sharedDicts) lines.push(`    lua_shared_dict ${name} ${size};`);
  if (h.underscoresInHeaders) lines.push(`    underscores_in_headers ${h.underscoresInHeaders};`);
  if (!h.accessLog) lines.push('    access_log off;');
  else {
    // APISIX's nginx.conf sets $upstream_scheme, $upstream_host and $upstream_uri, which its log formats name
    for (const v of ['scheme', 'host', 'uri']) lines.push(`    map $gateway_upstream_${v} $upstream_${v} { default $gateway_upstream_${v}; }`);
    lines.push(
      `    log_format main escape=${h.accessLog.escape} ${quoted(h.accessLog.format)};`,
      '    uninitialized_variable_warn off;',
      `    access_log ${h.accessLog.path} main buffer=${h.accessLog.buffer} flush=3;`,
    );
  }
  lines.push(
    `    client_max_body_size ${h.clientMaxBodySize};`,
    `    keepalive_timeout ${h.keepaliveTimeout};`,
    `    client_header_timeout ${h.clientHeaderTimeout};`,
    `    client_body_timeout ${h.clientBodyTimeout};`,
    `    send_timeout ${h.sendTimeout};`,
  );
  if (h.realIpHeader) lines.push(`    real_ip_header ${h.realIpHeader};`);
  if (h.realIpRecursive) lines.push(`    real_ip_recursive ${h.realIpRecursive};`);
  for (const from of h.realIpFrom) lines.push(`    set_real_ip_from ${from};`);
  lines.push(...snippetLines(h.snippets.http, '    '));
  return lines;
}

/**
 * The `*_ssl_*` rows for TLS to upstreams (http's proxy_ssl_* and
 * uwsgi_ssl_*, stream's proxy_ssl_*): each module says where the level's
 * settings live, in which contexts, and which variables values may use.
 */
import path from 'node:path';
import type { ConfContext } from '../conf/context.ts';
import type { Directive } from '../conf/directive.ts';
import { countArg, flagArg, stringArg } from '../conf/values.ts';
import { listOf, setting, unique } from '../conf/setters.ts';
import type { Parse } from '../conf/setters.ts';
import { Cycle } from '../core/cycle.ts';
import { compileComplex } from '../core/variables.ts';
import type { VariableRegistry } from '../core/variables.ts';
import { preload, tlsFiles } from './load-files.ts';
import { parseCertCache } from './upstream-cert-cache.ts';
import type { UpstreamSslConf } from './upstream-tls.ts';
import { confCommandArgs } from './server-directives.ts';

export function upstreamTlsDirectives(prefix: string, contexts: number, levelConf: (cf: ConfContext) => UpstreamSslConf, variables: (cf: ConfContext) => VariableRegistry<never>): Directive[] {
  // the settings are loaded on first use, from the files of the load that read them
  const sslConf = (cf: ConfContext) => {
    const s = levelConf(cf);
    s.files = tlsFiles(Cycle.of(cf));
    return s;
  };
  const ssl = <K extends keyof UpstreamSslConf>(name: string, field: K, parse: Parse<UpstreamSslConf[K]>, args: Directive['args'] = 1): Directive =>
    ({ name: prefix + name, contexts, args, handler: setting(sslConf, field, parse) });
  const cv = (cf: ConfContext, v: string) => compileComplex(cf, variables(cf), v) as UpstreamSslConf['name'];
  // a file is read by the master as the configuration loads, so that every worker gets its bytes
  const file = (cf: ConfContext, v: string) => {
    const p = cf.confPath(v);
    preload(tlsFiles(Cycle.of(cf)), p);
    return p;
  };
  const certificate = (cf: ConfContext, v: string) => {
    const value = cv(cf, v);
    if (value?.constant !== undefined && value.constant !== '') preload(tlsFiles(Cycle.of(cf)), path.resolve(cf.paths.confPrefix, value.constant));
    return value;
  };
  // as the arguments joined by spaces (a quoted "TLSv1.2 TLSv1.3" is two protocols)
  const protocols = (_cf: ConfContext, _v: string, args: readonly string[]) => args.join(' ').split(' ');
  return [
    ssl('ssl_server_name', 'serverName', flagArg, 'flag'),
    ssl('ssl_name', 'name', cv),
    ssl('ssl_verify', 'verify', flagArg, 'flag'),
    ssl('ssl_verify_depth', 'verifyDepth', countArg),
    ssl('ssl_trusted_certificate', 'trustedCertificate', file),
    ssl('ssl_crl', 'crl', file),
    ssl('ssl_certificate', 'certificate', certificate),
    ssl('ssl_certificate_key', 'certificateKey', certificate),
    ssl('ssl_password_file', 'passwordFile', file),
    ssl('ssl_session_reuse', 'sessionReuse', flagArg, 'flag'),
    ssl('ssl_protocols', 'protocols', protocols, [1, Infinity]),
    ssl('ssl_ciphers', 'ciphers', stringArg),
    {
      name: prefix + 'ssl_certificate_cache', contexts, args: [1, 3],
      handler: unique(sslConf, 'certificateCache', (_cf, node, s) => {
        const v = parseCertCache(node.args);
        if (typeof v === 'string') return v;
        s.certificateCache = v;
      }),
    },
    // Certificate, PrivateKey and Options take effect (src/tls/conf-commands.ts); others are kept without effect
    { name: prefix + 'ssl_conf_command', contexts, args: 2, handler: listOf(sslConf, 'confCommands', (cf, node) => confCommandArgs(cf, node.args)) },
  ];
}

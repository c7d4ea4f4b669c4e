/**
 * The `*_ssl_*` rows for TLS to upstreams (http's proxy_ssl_* and
 * uwsgi_ssl_*, stream's proxy_ssl_*): each module says where the level's
 * settings live, in which contexts, and which variables values may use.
 */
import type { ConfContext } from '../conf/context.ts';
import type { Directive } from '../conf/directive.ts';
import { confPathArg, countArg, flagArg, stringArg } from '../conf/values.ts';
import { listOf, setting, unique } from '../conf/setters.ts';
import type { Parse } from '../conf/setters.ts';
import { compileComplex } from '../core/variables.ts';
import type { VariableRegistry } from '../core/variables.ts';
import { parseCertCache } from './upstream-cert-cache.ts';
import type { UpstreamSslConf } from './upstream-tls.ts';
import { confCommandArgs } from './server-directives.ts';

export function upstreamTlsDirectives(prefix: string, contexts: number, sslConf: (cf: ConfContext) => UpstreamSslConf, variables: (cf: ConfContext) => VariableRegistry<never>): Directive[] {
  const ssl = <K extends keyof UpstreamSslConf>(name: string, field: K, parse: Parse<UpstreamSslConf[K]>, args: Directive['args'] = 1): Directive =>
    ({ name: prefix + name, contexts, args, handler: setting(sslConf, field, parse) });
  const cv = (cf: ConfContext, v: string) => compileComplex(cf, variables(cf), v) as UpstreamSslConf['name'];
  // as the arguments joined by spaces (a quoted "TLSv1.2 TLSv1.3" is two protocols)
  const protocols = (_cf: ConfContext, _v: string, args: readonly string[]) => args.join(' ').split(' ');
  return [
    ssl('ssl_server_name', 'serverName', flagArg, 'flag'),
    ssl('ssl_name', 'name', cv),
    ssl('ssl_verify', 'verify', flagArg, 'flag'),
    ssl('ssl_verify_depth', 'verifyDepth', countArg),
    ssl('ssl_trusted_certificate', 'trustedCertificate', confPathArg),
    ssl('ssl_crl', 'crl', confPathArg),
    ssl('ssl_certificate', 'certificate', cv),
    ssl('ssl_certificate_key', 'certificateKey', cv),
    ssl('ssl_password_file', 'passwordFile', confPathArg),
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

/**
 * ngx_http_ssl_module's configuration: the per-server slot and the
 * directive table. The ssl_* rows stream shares are src/tls/server-directives.ts;
 * the ones only http has (`ssl`, `ssl_buffer_size`, `ssl_early_data`) are
 * here. Values are kept as written (their types are src/tls/server-conf.ts);
 * src/tls turns them into TLS contexts once the http block is read
 * (postconfiguration).
 */
import { defineSlot, inheritUnset } from '../../../conf/context.ts';
import { Ctx } from '../../../conf/directive.ts';
import type { Directive } from '../../../conf/directive.ts';
import { flagArg, sizeArg } from '../../../conf/values.ts';
import { setting, unique } from '../../../conf/setters.ts';
import { httpMainOf } from '../../http-conf.ts';
import type { SslSrvConf } from '../../../tls/server-conf.ts';
import { serverTlsDirectives, SSL_DEFAULTS } from '../../../tls/server-directives.ts';

export const sslSrv = defineSlot<SslSrvConf, typeof SSL_DEFAULTS>('http_ssl_srv', () => ({}), inheritUnset, SSL_DEFAULTS);

const SRV = Ctx.HTTP | Ctx.SERVER;

export const sslDirectives: Directive[] = [
  {
    name: 'ssl', contexts: SRV, args: 'flag',
    handler: unique(sslSrv, 'enable', (cf, node, c) => {
      c.enable = flagArg(cf, node.args[0]);
      cf.warn('the "ssl" directive is deprecated, use the "listen ... ssl" directive instead');
    }),
  },
  ...serverTlsDirectives(sslSrv, SRV, (cf) => httpMainOf(cf).variables),
  { name: 'ssl_buffer_size', contexts: SRV, args: 1, handler: setting(sslSrv, 'bufferSize', sizeArg) },
  { name: 'ssl_early_data', contexts: SRV, args: 'flag', handler: setting(sslSrv, 'earlyData', flagArg) },
];

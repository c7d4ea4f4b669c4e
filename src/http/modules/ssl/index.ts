/**
 * ngx_http_ssl_module: TLS on `listen … ssl` addresses. Directives are in
 * conf.ts, variables in variables.ts, the handshake in handshake.ts; the TLS
 * machinery itself (contexts, sessions, tickets, verification, OCSP) lives
 * in src/tls. This file compiles each server block's TLS once the http
 * block is read and checks, before a request is processed, what nginx
 * checks there: plain HTTP on a TLS port (497), a Host that differs from
 * the SNI on a server verifying clients (421), client certificate errors
 * (495, 496).
 */
import type { ConfContext } from '../../../conf/context.ts';
import { ConfError } from '../../../conf/errors.ts';
import { Cycle } from '../../../core/cycle.ts';
import { setSecureAccept } from '../../address-server.ts';
import { DECLINED } from '../../http-conf.ts';
import type { HttpMainConf, HttpModule, ServerConf } from '../../http-conf.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { compileServerTls } from '../../../tls/server-tls.ts';
import type { ServerTls } from '../../../tls/server-tls.ts';
import { tlsFiles } from '../../../tls/load-files.ts';
import type { TlsFiles } from '../../../tls/load-files.ts';
import { sessionIdOf } from '../../../tls/der.ts';
import { isOptionalVerifyError } from '../../../tls/verify.ts';
import { coreLoc } from '../../core/settings.ts';
import { http2Srv } from '../../http2/module.ts';
import { sslDirectives, sslSrv } from './conf.ts';
import { certificateChoosers, secureAccept, serverTls } from './handshake.ts';
import { sslVariables } from './variables.ts';

function compileServer(srv: ServerConf, files: TlsFiles): ServerTls | undefined {
  const c = srv.level.get(sslSrv);
  if (!c.certificates?.length && !c.rejectHandshake && !certificateChoosers.has(srv)) return undefined;
  const core = srv.level.get(coreLoc);
  return compileServerTls(`${srv.file}:${srv.line}`, c, core.resolver, core.resolverTimeout, files);
}

function postconfiguration(http: HttpMainConf, cf: ConfContext): void {
  setSecureAccept(secureAccept);
  const sslServers = new Set<ServerConf>();
  for (const addr of http.addresses.values()) {
    // `ssl on` in the default server (nginx ≤ 1.25.0) makes the address a TLS one
    if (addr.defaultServer.level.get(sslSrv).enable) addr.ssl = true;
    // without TLS there is no SNI: `http2 on` of the default server decides, as in nginx
    if (!addr.ssl && addr.defaultServer.level.get(http2Srv).enable) addr.http2 = true;
    if (!addr.ssl) continue;
    for (const s of addr.servers) sslServers.add(s);
    // nginx: the default server of a TLS address needs certificates, unless it rejects handshakes
    const checkServer = (s: ServerConf) => {
      const c = s.level.get(sslSrv);
      if (!c.certificates?.length && !c.rejectHandshake && !certificateChoosers.has(s)) {
        throw new ConfError(`no "ssl_certificate" is defined for the "listen ... ssl" directive in ${s.file}:${s.line}`);
      }
    };
    checkServer(addr.defaultServer);
    if (!addr.defaultServer.level.get(sslSrv).certificates?.length) addr.servers.forEach(checkServer);
  }
  for (const s of sslServers) {
    const t = compileServer(s, tlsFiles(Cycle.of(cf)));
    if (t) serverTls.set(s, t);
  }
  // first: nginx checks the client certificate before the phases run (ngx_http_process_request)
  http.addPhaseHandler('POST_READ', 100, checkTlsRequest);
}

/** nginx's checks in ngx_http_process_request and ngx_http_set_virtual_server. */
function checkTlsRequest(r: HttpRequest): number {
  if (!r.conn.addr.ssl) return DECLINED;
  const t = r.conn.tls;
  if (!t) {
    requestLog(r).info('client sent plain HTTP request to HTTPS port while reading client request headers');
    return 497;
  }
  const conf = r.server.level.get(sslSrv);
  if (t.matchedName !== undefined && r.host && r.host !== t.matchedName && conf.verify !== 'off') {
    requestLog(r).info('client attempted to request the server name different from the one that was negotiated while reading client request headers');
    return 421;
  }
  if (conf.verify === undefined || conf.verify === 'off') return DECLINED;
  const v = t.verify;
  const forget = () => {
    const s = t.socket.getSession();
    const id = s && sessionIdOf(s);
    if (id) t.settings.sessionStore?.remove(id);
  };
  if (v && v.code !== 0 && !(conf.verify === 'optional_no_ca' && isOptionalVerifyError(v.code))) {
    requestLog(r).info(`client SSL certificate verify error: (${v.code}:${v.reason}) while reading client request headers`);
    forget();
    return 495;
  }
  if (conf.verify === 'on' && !t.peerCertificate) {
    requestLog(r).info('client sent no required SSL certificate while reading client request headers');
    forget();
    return 496;
  }
  if (v?.ocspFailed) {
    requestLog(r).info(`client SSL certificate verify error: ${v.reason} while reading client request headers`);
    forget();
    return 495;
  }
  return DECLINED;
}

export const sslModule: HttpModule = {
  name: 'ngx_http_ssl_module',
  directives: sslDirectives,
  variables: sslVariables,
  postconfiguration,
};

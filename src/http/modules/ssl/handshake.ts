/**
 * Accepting a connection on a `listen … ssl` address, as nginx's
 * ngx_http_ssl_handshake and its OpenSSL callbacks do: read the ClientHello,
 * choose the server block by SNI (server_name rules, as for Host), refuse
 * it with `unrecognized_name` when that server has `ssl_reject_handshake`,
 * load certificates named by variables, run the TLS handshake with that
 * server's context, check the client certificate, then hand the connection
 * to HTTP/1.x or HTTP/2 (ALPN). Bytes that are not TLS are served as HTTP
 * and answered 497 (see index.ts).
 */
import { handshakeErrorText } from '../../../tls/handshake-errors.ts';
import type { Socket } from 'node:net';
import tls from 'node:tls';
import { LogLevel } from '../../../core/error-log.ts';
import type { AddressServer } from '../../address-server.ts';
import type { HttpConnection } from '../../connection.ts';
import type { AddressConf, ServerConf } from '../../http-conf.ts';
import { HttpRequest, placeholderHead } from '../../request.ts';
import { Http1Response } from '../../http1-response.ts';
import { RequestBodySource } from '../../request-body-source.ts';
import { selectServer } from '../../virtual-server.ts';
import { coreSrv, CORE_SRV_DEFAULTS } from '../../core/settings.ts';
import { alertRecord, ALERT_INTERNAL_ERROR, ALERT_UNRECOGNIZED_NAME, MAX_HELLO_BYTES, readClientHello } from '../../../tls/client-hello.ts';
import type { ClientHello } from '../../../tls/client-hello.ts';
import type { ServerTls } from '../../../tls/server-tls.ts';
import type { TlsConnection } from '../../../tls/connection-info.ts';
import { CertLoadError } from '../../../tls/certificates.ts';
import { ACME_TLS_ALPN, alpnChallengeContext } from '../../../tls/certificate-registry.ts';
import { sessionHub } from '../../../tls/sessions.ts';
import { verifyClient } from '../../../tls/verify.ts';
import { peerCertificates } from '../../../tls/peer-chain.ts';
import type { HandshakeChoice } from '../../../tls/handshake-choice.ts';
import { connectionLog } from './log.ts';
import { parseProxyProtocol, proxyHeaderComplete } from '../../../core/proxy-protocol.ts';
import { serveHttp2, wantsHttp2 } from '../../http2.ts';

/** Each server block's compiled TLS (filled by the module's postconfiguration). */
export const serverTls = new WeakMap<ServerConf, ServerTls>();

/** The SNI of a connection still in its handshake (for `$ssl_server_name` in `ssl_certificate $ssl_server_name.crt`). */
export const handshakeServerName = new WeakMap<HttpConnection, string>();

/**
 * Servers whose certificates are chosen per handshake by something other
 * than their ssl_* directives (the gateway's SSL objects, as APISIX's
 * ssl_client_hello_by_lua): a choice, or the message logged (error) when
 * the handshake is refused.
 */
export type CertificateChooser = (conn: HttpConnection, hello: ClientHello | undefined) => HandshakeChoice | string;
export const certificateChoosers = new WeakMap<ServerConf, CertificateChooser>();

export function secureAccept(server: AddressServer, conn: HttpConnection, socket: Socket): void {
  const addr = server.addr;
  // nginx waits for the first bytes (and the handshake) as long as for a request head
  const timeout = addr.defaultServer.level.get(coreSrv).clientHeaderTimeout;
  socket.setTimeout(timeout, () => socket.destroy());
  if (!addr.ssl) return acceptCleartext(server, conn, socket);
  let buffered: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
    const proxy = proxyHeader(server, conn, buffered);
    if (proxy === undefined) return;
    const res = proxy < 0 ? undefined : readClientHello(buffered.subarray(proxy));
    if (res?.kind === 'incomplete' && buffered.length - proxy <= MAX_HELLO_BYTES) return;
    socket.off('data', onData);
    socket.off('end', onEnd);
    socket.pause();
    if (!res || res.kind === 'plain') {
      // nginx reads the request and answers 497 ("The plain HTTP request was sent to HTTPS port");
      // (a broken PROXY header is HTTP/1.x's to log and close on)
      socket.setTimeout(0);
      server.serve(conn, socket, buffered);
      return;
    }
    socket.unshift(buffered.subarray(proxy));
    startTls(server, conn, socket, res.kind === 'hello' ? res.hello : undefined, buffered.subarray(0, proxy));
  };
  const onEnd = () => socket.destroy();
  socket.on('data', onData);
  socket.once('end', onEnd);
}

const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/**
 * `listen … proxy_protocol`: the length of the PROXY header at the start of
 * `bytes` (its addresses go to `conn`), undefined while incomplete, -1 when
 * broken. HTTP/1.x reads the header again from the bytes it is handed.
 */
function proxyHeader(server: AddressServer, conn: HttpConnection, bytes: Buffer): number | undefined {
  if (!server.addr.proxyProtocol) return 0;
  if (!proxyHeaderComplete(bytes)) return undefined;
  const parsed = parseProxyProtocol(bytes);
  if ('error' in parsed) return -1;
  conn.proxyProtocol = parsed.info;
  return parsed.length;
}

/** `listen … http2` without TLS: HTTP/2 with prior knowledge (h2c) when the client starts with its preface, else HTTP/1.x. */
function acceptCleartext(server: AddressServer, conn: HttpConnection, socket: Socket): void {
  let buffered: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
    const proxy = proxyHeader(server, conn, buffered);
    if (proxy === undefined) return;
    const n = Math.min(buffered.length - proxy, H2_PREFACE.length);
    const preface = proxy >= 0 && buffered.subarray(proxy, proxy + n).equals(H2_PREFACE.subarray(0, n));
    if (preface && n < H2_PREFACE.length) return;
    socket.off('data', onData);
    socket.off('end', onEnd);
    socket.setTimeout(0);
    socket.pause();
    if (!preface) return server.serve(conn, socket, buffered);
    serveHttp2(server, conn, socket, server.addr.defaultServer, buffered.subarray(proxy));
  };
  const onEnd = () => socket.destroy();
  socket.on('data', onData);
  socket.once('end', onEnd);
}

/** nginx's SNI rules: a name that selects a server block, or undefined (the default server serves). */
function serverBySni(addr: AddressConf, sni: string | undefined): { server: ServerConf; matched: string | undefined } {
  if (!sni) return { server: addr.defaultServer, matched: undefined };
  const host = sni.toLowerCase().replace(/\.$/, '');
  if (!host || host.includes('..') || /[/\\\0\s]/.test(host)) return { server: addr.defaultServer, matched: undefined };
  const m = selectServer(addr, host);
  const found = m.server !== addr.defaultServer || nameMatches(m.server, host);
  return { server: m.server, matched: found ? host : undefined };
}

function nameMatches(srv: ServerConf, host: string): boolean {
  return srv.names.some((n) => {
    if (n.regex) return n.regex.test(host);
    if (n.name.startsWith('*.')) return host.endsWith(n.name.slice(1));
    if (n.name.startsWith('.')) return host === n.name.slice(1) || host.endsWith(n.name);
    if (n.name.endsWith('.*')) return host.startsWith(n.name.slice(0, -1));
    return n.name === host;
  });
}

function refuse(socket: Socket, alert: number): void {
  socket.setTimeout(0);
  socket.end(alertRecord(alert));
  socket.resume();
  setTimeout(() => socket.destroy(), 1000).unref();
}

function startTls(server: AddressServer, conn: HttpConnection, socket: Socket, hello: ClientHello | undefined, proxyBytes: Buffer): void {
  const challenge = alpnChallengeContext(hello);
  if (challenge) return answerAlpnChallenge(socket, challenge);
  const addr = server.addr;
  const { server: named, matched } = serverBySni(addr, hello?.serverName);
  // a server block without certificates keeps the default server's context, as in nginx
  const own = serverTls.get(named);
  const chooser = certificateChoosers.get(named) ?? certificateChoosers.get(addr.defaultServer);
  const settings = own?.hasCertificates || (chooser && own) ? own : serverTls.get(addr.defaultServer);
  if (!chooser && (own?.conf.rejectHandshake || !settings || !settings.hasCertificates)) {
    if (!own?.conf.rejectHandshake) connectionLog(server, conn, LogLevel.info, 'SSL_do_handshake() failed (SSL: error:0A0000C1:SSL routines::no shared cipher) while SSL handshaking');
    refuse(socket, ALERT_UNRECOGNIZED_NAME);
    return;
  }
  if (!settings) return refuse(socket, ALERT_INTERNAL_ERROR);
  let ctx: tls.SecureContext;
  let choice: HandshakeChoice | undefined;
  try {
    if (hello?.serverName !== undefined) handshakeServerName.set(conn, hello.serverName);
    if (chooser) {
      const chosen = chooser(conn, hello);
      if (typeof chosen === 'string') {
        connectionLog(server, conn, LogLevel.error, `${chosen} while SSL handshaking`);
        refuse(socket, ALERT_INTERNAL_ERROR);
        return;
      }
      choice = chosen;
      ctx = chosen.context;
    } else {
      ctx = settings.contextFor((cv) => cv.evaluate(handshakeRequest(server, conn, named)));
    }
  } catch (err) {
    // a certificate that cannot be used fails this handshake only (nginx's certificate callback)
    const text = err instanceof CertLoadError ? err.message : `cannot use certificate: ${(err as Error).message}`;
    connectionLog(server, conn, LogLevel.error, `${text} while SSL handshaking`);
    refuse(socket, ALERT_INTERNAL_ERROR);
    return;
  }
  const http2 = wantsHttp2(addr, named);
  const tlsSocket = new tls.TLSSocket(socket, {
    isServer: true,
    secureContext: ctx,
    server: sessionHub(settings, hello) as unknown as tls.Server,
    requestCert: choice ? choice.verify !== undefined : settings.conf.verify !== 'off',
    rejectUnauthorized: choice?.requireClient === true,
    ALPNProtocols: http2 ? ['h2', 'http/1.1'] : ['http/1.1'],
  });
  let established = false;
  tlsSocket.on('error', (err: Error) => {
    // after the handshake, errors belong to HTTP (which has its own handler)
    if (!established) {
      // OpenSSL 3's text as nginx prints it: `error:0A0000C1:SSL routines::no shared cipher`
      connectionLog(server, conn, LogLevel.info, `SSL_do_handshake() failed (SSL: ${handshakeErrorText(err)}) while SSL handshaking`);
    }
    tlsSocket.destroy();
  });
  tlsSocket.once('secure', () => {
    established = true;
    socket.setTimeout(0);
    const info: TlsConnection = {
      socket: tlsSocket,
      hello,
      serverName: hello?.serverName,
      matchedName: matched,
      settings,
      verify: undefined,
      protocol: tlsSocket.getProtocol() ?? '',
      cipher: tlsSocket.getCipher()?.name ?? '',
      reused: tlsSocket.isSessionReused(),
      peerCertificate: settings.conf.verify !== 'off' || choice?.verify ? peerCertificates(tlsSocket)?.leaf : undefined,
    };
    conn.tls = info;
    handshakeServerName.delete(conn);
    if (settings.conf.bufferSize < 16384) tlsSocket.setMaxSendFragment(Math.max(512, settings.conf.bufferSize));
    const handOff = () => {
      if (tlsSocket.destroyed) return;
      if (tlsSocket.alpnProtocol === 'h2') serveHttp2(server, conn, tlsSocket, named);
      else server.serve(conn, tlsSocket, proxyBytes.length ? proxyBytes : undefined);
    };
    void verifyClient(choice?.verify ?? settings, tlsSocket).catch(() => ({ code: 1, reason: 'unspecified certificate verification error' })).then((result) => {
      info.verify = result;
      // Node's handshake takes any certificate it is sent (only a missing one fails it): one that does not verify ends here, before a request is read
      if (choice?.requireClient && result && result.code !== 0) {
        connectionLog(server, conn, LogLevel.info, `client SSL certificate verify error: (${result.code}:${result.reason}) while SSL handshaking`);
        tlsSocket.destroy();
        return;
      }
      // TLS 1.3 session tickets are issued right after 'secure' and reach the session
      // cache through tlsSocket.server, which node:http replaces: hand over after them
      setImmediate(handOff);
    });
  });
}

/** RFC 8737: an ACME validator's handshake gets the challenge certificate, and the connection ends there. */
function answerAlpnChallenge(socket: Socket, context: tls.SecureContext): void {
  const tlsSocket = new tls.TLSSocket(socket, { isServer: true, secureContext: context, ALPNProtocols: [ACME_TLS_ALPN] });
  tlsSocket.on('error', () => tlsSocket.destroy());
  tlsSocket.once('secure', () => {
    socket.setTimeout(0);
    tlsSocket.end();
  });
}

/** A request object for evaluating variables during the handshake (nginx's fake request in its certificate callback). */
function handshakeRequest(server: AddressServer, conn: HttpConnection, srv: ServerConf): HttpRequest {
  // nothing is ever written to its sink: it answers variables only
  const sink = new Http1Response(conn.socket, false, false);
  return new HttpRequest(conn, server.main, srv, placeholderHead(srv), [], sink, RequestBodySource.empty());
}

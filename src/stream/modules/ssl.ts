/**
 * ngx_stream_ssl_module: TLS termination on `listen … ssl` addresses. The
 * ssl_* directives are the ones http has (src/tls/server-directives.ts),
 * plus `ssl_handshake_timeout` and `ssl_alpn`; the $ssl_* variables are
 * the shared list (src/tls/variables.ts). In the SSL phase the session
 * reads the ClientHello, lets the SNI choose the server (server_name),
 * refuses the handshake where that server has `ssl_reject_handshake`,
 * loads certificates named by variables, runs the handshake with that
 * server's TLS context and checks the client certificate as
 * ngx_stream_ssl_handler does; later phases and the content handler read
 * and write the decrypted socket.
 */
import type { Socket } from 'node:net';
import tls from 'node:tls';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import { msecArg } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import { Cycle } from '../../core/cycle.ts';
import { LogLevel } from '../../core/error-log.ts';
import type { ResolverConf } from '../../upstream/resolver.ts';
import { alertRecord, ALERT_INTERNAL_ERROR, ALERT_UNRECOGNIZED_NAME, MAX_HELLO_BYTES, readClientHello } from '../../tls/client-hello.ts';
import type { ClientHello } from '../../tls/client-hello.ts';
import { CertLoadError } from '../../tls/certificates.ts';
import { sessionIdOf } from '../../tls/der.ts';
import type { SslSrvConf } from '../../tls/server-conf.ts';
import { serverTlsDirectives, SSL_DEFAULTS } from '../../tls/server-directives.ts';
import { compileServerTls } from '../../tls/server-tls.ts';
import type { ServerTls } from '../../tls/server-tls.ts';
import { tlsFiles } from '../../tls/load-files.ts';
import { sessionHub } from '../../tls/sessions.ts';
import { handshakeErrorText } from '../../tls/handshake-errors.ts';
import { tlsVariables } from '../../tls/variables.ts';
import { isOptionalVerifyError, verifyClient } from '../../tls/verify.ts';
import { peerCertificates } from '../../tls/peer-chain.ts';
import { DECLINED, OK, Status, streamMainOf } from '../conf.ts';
import type { StreamMainConf, StreamModule, StreamServerConf } from '../conf.ts';
import type { StreamSession } from '../session.ts';
import { streamCoreSrv } from './core.ts';
import { chooseServer } from '../virtual-server.ts';

interface StreamSslConf extends SslSrvConf {
  /** `ssl_alpn`: the protocols offered, in preference order. */
  alpn?: string[];
  handshakeTimeout?: number;
}

const DEFAULTS = { ...SSL_DEFAULTS, handshakeTimeout: 60_000 } as const satisfies StreamSslConf;

export const streamSslSrv = defineSlot<StreamSslConf, typeof DEFAULTS>('stream_ssl_srv', () => ({}), inheritUnset, DEFAULTS);

const ANY = Ctx.STREAM | Ctx.STREAM_SERVER;

const directives: Directive[] = [
  ...serverTlsDirectives(streamSslSrv, ANY, (cf) => streamMainOf(cf).variables),
  { name: 'ssl_handshake_timeout', contexts: ANY, args: 1, handler: setting(streamSslSrv, 'handshakeTimeout', msecArg) },
  {
    name: 'ssl_alpn', contexts: ANY, args: [1, Infinity],
    handler: setting(streamSslSrv, 'alpn', (cf, _v, args) => {
      for (const p of args) if (p.length > 255) throw cf.error('protocol too long');
      return [...args];
    }),
  },
];

/** Each server's compiled TLS (filled at postconfiguration). */
const serverTls = new WeakMap<StreamServerConf, ServerTls>();

function resolverAddresses(r: ResolverConf | undefined): string[] | undefined {
  return r?.servers.map((s) => (s.host.includes(':') ? `[${s.host}]:${s.port}` : `${s.host}:${s.port}`));
}

function postconfiguration(stream: StreamMainConf, cf: ConfContext): void {
  const files = tlsFiles(Cycle.of(cf));
  stream.addPhaseHandler('SSL', sslHandler);
  const noCertificate = (srv: StreamServerConf) =>
    new ConfError(`no "ssl_certificate" is defined for the "listen ... ssl" directive in ${srv.file}:${srv.line}`);
  const compiled = new Set<StreamServerConf>();
  for (const srv of stream.servers) {
    const c = srv.level.get(streamSslSrv);
    if (!c.certificates?.length && !c.rejectHandshake) continue;
    const core = srv.level.get(streamCoreSrv);
    serverTls.set(srv, compileServerTls(`${srv.file}:${srv.line}`, c, resolverAddresses(core.resolver), core.resolverTimeout, files));
    compiled.add(srv);
  }
  for (const addr of stream.addresses.values()) {
    if (!addr.listen.ssl) continue;
    const def = addr.defaultServer;
    if (def.level.get(streamSslSrv).certificates?.length) continue;
    if (!def.level.get(streamSslSrv).rejectHandshake) throw noCertificate(def);
    for (const srv of addr.servers) if (!compiled.has(srv)) throw noCertificate(srv);
  }
}

function refuse(socket: Socket, alert: number): void {
  socket.end(alertRecord(alert));
  socket.resume();
  setTimeout(() => socket.destroy(), 1000).unref();
}

/** Reads the ClientHello (or what the client sent instead) and puts the bytes back; undefined when the client went away. */
function readHello(s: StreamSession, timeoutMs: number): Promise<{ hello: ClientHello | undefined } | 'timeout' | 'closed'> {
  const socket = s.socket;
  return new Promise((resolve) => {
    let buffered: Buffer = Buffer.alloc(0);
    const done = (v: { hello: ClientHello | undefined } | 'timeout' | 'closed') => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.pause();
      if (buffered.length) socket.unshift(buffered);
      resolve(v);
    };
    const onData = (chunk: Buffer) => {
      buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
      const res = readClientHello(buffered);
      if (res.kind === 'incomplete' && buffered.length <= MAX_HELLO_BYTES) return;
      done({ hello: res.kind === 'hello' ? res.hello : undefined });
    };
    const onEnd = () => done('closed');
    const timer = setTimeout(() => done('timeout'), timeoutMs);
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.resume();
  });
}

/** The SSL phase (ngx_stream_ssl_handler): the handshake, then nginx's client certificate checks. */
async function sslHandler(s: StreamSession): Promise<number> {
  if (!s.listen.ssl) return DECLINED;
  s.action = 'SSL handshaking';
  const timeout = s.level.get(streamSslSrv).handshakeTimeout;
  const started = performance.now();
  const read = await readHello(s, timeout);
  if (s.finalized) return OK;
  if (read === 'timeout') {
    s.error(LogLevel.info, 'client timed out (110: Connection timed out)');
    return Status.INTERNAL_SERVER_ERROR;
  }
  if (read === 'closed') {
    s.error(LogLevel.info, 'client closed connection');
    return Status.INTERNAL_SERVER_ERROR;
  }
  const hello = read.hello;
  chooseServer(s, hello?.serverName);
  const conf = s.level.get(streamSslSrv);
  const settings = serverTls.get(s.server) ?? serverTls.get(s.address.defaultServer);
  if (conf.rejectHandshake || !settings?.hasCertificates) {
    refuse(s.socket, ALERT_UNRECOGNIZED_NAME);
    return Status.INTERNAL_SERVER_ERROR;
  }
  let ctx: tls.SecureContext;
  try {
    s.handshakeServerName = hello?.serverName;
    ctx = settings.contextFor((cv) => cv.evaluate(s as never));
  } catch (err) {
    const text = err instanceof CertLoadError ? err.message : `cannot use certificate: ${(err as Error).message}`;
    s.error(LogLevel.error, text);
    refuse(s.socket, ALERT_INTERNAL_ERROR);
    return Status.INTERNAL_SERVER_ERROR;
  }
  const raw = s.socket;
  const tlsSocket = new tls.TLSSocket(raw, {
    isServer: true,
    secureContext: ctx,
    server: sessionHub(settings, hello) as unknown as tls.Server,
    requestCert: settings.conf.verify !== 'off',
    rejectUnauthorized: false,
    ALPNCallback: conf.alpn ? ({ protocols }) => conf.alpn!.find((p) => protocols.includes(p)) : undefined,
  });
  tlsSocket.allowHalfOpen = true;
  const established = await new Promise<boolean>((resolve) => {
    const left = Math.max(1, timeout - (performance.now() - started));
    const timer = setTimeout(() => {
      s.error(LogLevel.info, 'client timed out (110: Connection timed out)');
      resolve(false);
    }, left);
    tlsSocket.once('secure', () => { clearTimeout(timer); resolve(true); });
    tlsSocket.once('error', (err: Error) => {
      clearTimeout(timer);
      s.error(LogLevel.info, `SSL_do_handshake() failed (SSL: ${handshakeErrorText(err)})`);
      resolve(false);
    });
    tlsSocket.once('close', () => { clearTimeout(timer); resolve(false); });
  });
  s.handshakeServerName = undefined;
  if (s.finalized) return OK;
  if (!established) {
    tlsSocket.destroy();
    return Status.INTERNAL_SERVER_ERROR;
  }
  const verify = settings.conf.verify;
  const info = {
    socket: tlsSocket,
    hello,
    serverName: hello?.serverName,
    matchedName: undefined,
    settings,
    verify: undefined as Awaited<ReturnType<typeof verifyClient>>,
    protocol: tlsSocket.getProtocol() ?? '',
    cipher: tlsSocket.getCipher()?.name ?? '',
    reused: tlsSocket.isSessionReused(),
    peerCertificate: verify !== 'off' ? peerCertificates(tlsSocket)?.leaf : undefined,
  };
  s.socket = tlsSocket;
  s.tls = info;
  tlsSocket.on('error', (err: NodeJS.ErrnoException) => { if (!s.finalized) s.onClientError(err); });
  tlsSocket.on('close', () => { if (!s.finalized) s.terminate(); });
  tlsSocket.pause();
  // TLS 1.3 session tickets go out right after 'secure': what the session writes must follow them
  await new Promise(setImmediate);
  if (s.finalized) return OK;
  if (verify === 'off') return OK;
  info.verify = await verifyClient(settings, tlsSocket).catch(() => ({ code: 1, reason: 'unspecified certificate verification error' }));
  if (s.finalized) return OK;
  const forget = () => {
    const id = tlsSocket.getSession();
    const sid = id && sessionIdOf(id);
    if (sid) settings.sessionStore?.remove(sid);
  };
  const v = info.verify;
  if (v && v.code !== 0 && !(verify === 'optional_no_ca' && isOptionalVerifyError(v.code))) {
    s.error(LogLevel.info, `client SSL certificate verify error: (${v.code}:${v.reason})`);
    forget();
    return Status.INTERNAL_SERVER_ERROR;
  }
  if (verify === 'on' && !info.peerCertificate) {
    s.error(LogLevel.info, 'client sent no required SSL certificate');
    forget();
    return Status.INTERNAL_SERVER_ERROR;
  }
  if (v?.ocspFailed) {
    s.error(LogLevel.info, `client SSL certificate verify error: ${v.reason}`);
    forget();
    return Status.INTERNAL_SERVER_ERROR;
  }
  return OK;
}

export const streamSslModule: StreamModule = {
  name: 'ngx_stream_ssl_module',
  directives,
  variables: tlsVariables<StreamSession>({ tls: (s) => s.tls, handshakeServerName: (s) => s.handshakeServerName }),
  postconfiguration,
};

/**
 * tcpsock:sslhandshake(reused_session, server_name, ssl_verify,
 * send_status_req): TLS over the connected socket. Verification is against
 * lua_ssl_trusted_certificate only (no system roots, as OpenResty has none
 * without it), at most lua_ssl_verify_depth intermediates, with OpenSSL's
 * error number and text, and the host name check when a server name is
 * given. The session comes back as a light
 * userdata that a later handshake may offer again.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { LuaBridge } from '../../../lua/bridge.ts';
import { T } from '../../../lua/bridge.ts';
import { LogLevel } from '../../../core/error-log.ts';
import { logFor } from './runtime.ts';
import type { HookContext } from './runtime.ts';
import type { TcpCosocket } from './api-socket-tcp.ts';
import { pushFailure } from './socket-lifetime.ts';

/** OpenSSL's X509_V_ERR numbers for the verification errors Node names. */
const X509_ERRORS: Record<string, number> = {
  UNABLE_TO_GET_ISSUER_CERT: 2, CERT_NOT_YET_VALID: 9, CERT_HAS_EXPIRED: 10, DEPTH_ZERO_SELF_SIGNED_CERT: 18,
  SELF_SIGNED_CERT_IN_CHAIN: 19, UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 20, UNABLE_TO_VERIFY_LEAF_SIGNATURE: 21,
  CERT_CHAIN_TOO_LONG: 22, CERT_REVOKED: 23, INVALID_CA: 24, CERT_UNTRUSTED: 27, CERT_REJECTED: 28,
};

/** Sessions handed to Lua, by the light userdata's value. */
const sessions = new Map<number, Buffer>();
const MAX_SESSIONS = 1000;
let nextSession = 1;

type Outcome = { ok: true; sock: tls.TLSSocket } | { ok: false; err: string };

export function sslHandshake(bridge: LuaBridge, L: number, s: TcpCosocket, ctx: HookContext,
  closeStream: (s: TcpCosocket) => void): number {
  const stream = s.stream!;
  const reuseArg = bridge.type(L, 2);
  const wantSession = reuseArg !== T.BOOLEAN || bridge.toBoolean(L, 2);
  const offered = reuseArg === T.LIGHTUSERDATA ? sessions.get(Number(bridge.api.lua_touserdata(L, 2))) : undefined;
  const serverName = bridge.type(L, 3) === T.STRING ? bridge.toString(L, 3) : undefined;
  const verify = bridge.toBoolean(L, 4);
  const log = (text: string) => { if (s.settings.logErrors) logFor(ctx, LogLevel.error, text); };
  // a pooled connection that had its handshake already: nothing to do again, as in OpenResty
  if (stream.socket instanceof tls.TLSSocket) return pushResult(bridge, L, stream.socket, wantSession);

  const done = new Promise<Outcome>((resolve) => {
    const sock = tls.connect({
      socket: stream.socket,
      servername: serverName && !net.isIP(serverName) ? serverName : undefined,
      rejectUnauthorized: false,
      ca: s.settings.trusted ? [s.settings.trusted] : [],
      session: offered,
    });
    // errors after the outcome (the peer resets a failed handshake) must not go unheard
    sock.on('error', () => {});
    const timer = setTimeout(() => {
      log('lua ssl handshake timed out');
      resolve({ ok: false, err: 'timeout' });
    }, s.connectTimeout || s.settings.connectTimeout);
    sock.once('secureConnect', () => {
      clearTimeout(timer);
      if (verify) {
        const code = sock.authorizationError as unknown as string | undefined;
        // Node's own host check (from `servername`) is not a chain error: the host is checked below
        if (!sock.authorized && code && code !== 'ERR_TLS_CERT_ALTNAME_INVALID') {
          const n = X509_ERRORS[code] ?? 0;
          const text = (sock.authorizationError as Error & { message?: string })?.message ?? String(code);
          log(`lua ssl certificate verify error: (${n}: ${verifyText(code, text)})`);
          return resolve({ ok: false, err: `${n}: ${verifyText(code, text)}` });
        }
        if (intermediates(sock) > s.settings.verifyDepth) {
          // OpenSSL stops building the chain at lua_ssl_verify_depth and finds no issuer
          log('lua ssl certificate verify error: (20: unable to get local issuer certificate)');
          return resolve({ ok: false, err: '20: unable to get local issuer certificate' });
        }
        if (serverName && tls.checkServerIdentity(serverName, sock.getPeerCertificate())) {
          log(`lua ssl certificate does not match host "${serverName}"`);
          return resolve({ ok: false, err: 'certificate host mismatch' });
        }
      }
      resolve({ ok: true, sock });
    });
    sock.once('error', () => {
      clearTimeout(timer);
      resolve({ ok: false, err: 'handshake failed' });
    });
  });

  return bridge.suspend(done, (L1, o) => {
    if (!o.ok) {
      closeStream(s);
      return pushFailure(bridge, L1, o.err);
    }
    stream.replace(o.sock);
    return pushResult(bridge, L1, o.sock, wantSession);
  });
}

/** true, or the session as a light userdata a later handshake may offer. */
function pushResult(bridge: LuaBridge, L: number, sock: tls.TLSSocket, wantSession: boolean): number {
  if (!wantSession) {
    bridge.pushBoolean(L, true);
    return 1;
  }
  const session = sock.getSession();
  const id = nextSession++;
  if (session) sessions.set(id, session);
  // the oldest sessions go: Lua holds them as plain numbers, never freed
  if (sessions.size > MAX_SESSIONS) sessions.delete(sessions.keys().next().value!);
  bridge.api.lua_pushlightuserdata(L, id);
  return 1;
}

/** CA certificates between the peer's certificate and the trust anchor (what lua_ssl_verify_depth limits). */
function intermediates(sock: tls.TLSSocket): number {
  let cert = sock.getPeerCertificate(true);
  let n = 0;
  const seen = new Set<string>();
  while (cert.issuerCertificate && cert.issuerCertificate !== cert && !seen.has(cert.fingerprint256)) {
    seen.add(cert.fingerprint256);
    cert = cert.issuerCertificate;
    // the anchor (self-issued) does not count
    if (cert.issuerCertificate !== cert && cert.fingerprint256 !== cert.issuerCertificate?.fingerprint256) n++;
  }
  return n;
}

/** OpenSSL's X509_verify_cert_error_string for the common codes (Node's message otherwise). */
function verifyText(code: string, fallback: string): string {
  switch (code) {
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY': return 'unable to get local issuer certificate';
    case 'DEPTH_ZERO_SELF_SIGNED_CERT': return 'self-signed certificate';
    case 'SELF_SIGNED_CERT_IN_CHAIN': return 'self-signed certificate in certificate chain';
    case 'CERT_HAS_EXPIRED': return 'certificate has expired';
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE': return 'unable to verify the first certificate';
  }
  return fallback;
}

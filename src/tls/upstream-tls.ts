/**
 * TLS to upstreams, for http's proxy (and uwsgi, gRPC) and stream's proxy:
 * the node:tls client options the `*_ssl_*` directives ask for (SNI,
 * client certificate, protocols, ciphers, trusted CAs), session reuse per
 * peer, and the checks nginx makes after the handshake (`*_ssl_verify`:
 * chain and name) with its log messages.
 */
import tls from 'node:tls';
import net from 'node:net';
import path from 'node:path';
import type { ComplexValue, VariableHost } from '../core/variables.ts';
import { CertCache, loadCertificate, loadKey } from './upstream-cert-cache.ts';
import { applyOptions, overridePair } from './conf-commands.ts';
import type { CertCacheConf, LoadedKey } from './upstream-cert-cache.ts';
import { diskFiles } from './load-files.ts';
import type { TlsFiles } from './load-files.ts';

/** A level's `*_ssl_*` settings (values with variables are evaluated for each request or session `H`). */
export interface UpstreamSslConf<H extends VariableHost = VariableHost> {
  serverName?: boolean;
  name?: ComplexValue<H>;
  verify?: boolean;
  verifyDepth?: number;
  trustedCertificate?: string;
  certificate?: ComplexValue<H>;
  certificateKey?: ComplexValue<H>;
  passwordFile?: string;
  sessionReuse?: boolean;
  protocols?: string[];
  ciphers?: string;
  crl?: string;
  /** *_ssl_certificate_cache (false: off). */
  certificateCache?: CertCacheConf | false;
  /** `proxy_ssl_alpn` (stream): the protocols offered (empty values are left out). */
  alpn?: Array<ComplexValue<H>>;
  /** `*_ssl_conf_command`s. */
  confCommands?: Array<[string, string]>;
  /** Where relative certificate paths (possibly built from variables) are resolved. */
  confPrefix?: string;
  /** The files of the configuration load these settings came from (they are loaded on first use). */
  files?: TlsFiles;
}

/** What is made of a file's bytes (the CRL list, the passwords), once per load's bytes. */
const derived = new WeakMap<Buffer, string[]>();

function derive(bytes: Buffer, make: (text: string) => string[]): string[] {
  let list = derived.get(bytes);
  if (!list) derived.set(bytes, (list = make(bytes.toString('latin1'))));
  return list;
}

/** The PEM blocks of a proxy_ssl_crl file. */
function crlsOf(s: UpstreamSslConf, file: string): string[] {
  return derive(filesOf(s).bytes(file), (t) => t.match(/-----BEGIN X509 CRL-----[^-]+-----END X509 CRL-----/g) ?? []);
}

/** proxy_ssl_password_file lines (nginx reads them with the configuration). */
function passwordsOf(s: UpstreamSslConf): string[] | undefined {
  if (!s.passwordFile) return undefined;
  return derive(filesOf(s).bytes(s.passwordFile), (t) => t.split(/\r?\n/).filter((l) => l !== ''));
}

/** The files of the settings' load (every *_ssl_* directive names it). */
function filesOf(s: UpstreamSslConf): TlsFiles {
  return s.files ?? diskFiles;
}

/** Client certificates of paths without variables: loaded once per configuration load, as nginx does. */
const staticCertificates = new WeakMap<TlsFiles, Map<string, { cert: Buffer; key: LoadedKey }>>();
const certCaches = new WeakMap<CertCacheConf, CertCache>();

function clientCertificate<H extends VariableHost>(logError: (message: string) => void, s: UpstreamSslConf<H>, certPath: string, keyPath: string): { cert: Buffer; key: LoadedKey } | undefined {
  try {
    const passwords = passwordsOf(s);
    const fixed = s.certificate!.constant !== undefined && (!s.certificateKey || s.certificateKey.constant !== undefined);
    const files = fixed ? filesOf(s) : undefined;
    // as nginx: the key is loaded first, then the certificate
    const load = () => {
      const key = loadKey(keyPath, passwords, files);
      return { cert: loadCertificate(certPath, files), key };
    };
    if (files) {
      let loaded = staticCertificates.get(files);
      if (!loaded) staticCertificates.set(files, (loaded = new Map()));
      let c = loaded.get(certPath + '\n' + keyPath);
      if (!c) loaded.set(certPath + '\n' + keyPath, (c = load()));
      return c;
    }
    const cacheConf = s.certificateCache;
    if (!cacheConf) return load();
    let cache = certCaches.get(cacheConf);
    if (!cache) certCaches.set(cacheConf, (cache = new CertCache(cacheConf)));
    return cache.pair(certPath, keyPath, passwords);
  } catch (err) {
    logError((err as Error).message);
    return undefined;
  }
}

const VERSIONS: Record<string, tls.SecureVersion> = {
  TLSv1: 'TLSv1', 'TLSv1.1': 'TLSv1.1', 'TLSv1.2': 'TLSv1.2', 'TLSv1.3': 'TLSv1.3',
};

const noIdentityCheck = (): undefined => undefined;

/** Sessions kept for reuse, by peer and name (nginx keeps one per peer). */
const sessions = new Map<string, Buffer>();

export interface UpstreamTls {
  options: tls.ConnectionOptions;
  /** The name checked with proxy_ssl_verify (proxy_ssl_name or the proxy_pass host). */
  name: string;
  verify: boolean;
  /** Key for session reuse, or undefined when proxy_ssl_session_reuse is off. */
  sessionKey: string | undefined;
}

/**
 * The TLS settings for a request or session `r` to `host` (the name in proxy_pass, for SNI unless
 * *_ssl_name says otherwise) from a level configured with `s`; undefined (logged with `logError`)
 * when the client certificate cannot be loaded.
 */
export function upstreamTls<H extends VariableHost>(r: H, s: UpstreamSslConf<H>, host: string, logError: (message: string) => void): UpstreamTls | undefined {
  let name = s.name ? s.name.evaluate(r) : host;
  // nginx drops a port from the name and sends no SNI for an IP address
  const colon = name.lastIndexOf(':');
  if (colon > 0 && !name.endsWith(']') && !net.isIPv6(name)) name = name.slice(0, colon);
  // the chain is checked by OpenSSL; the name is checked here, against proxy_ssl_name (verifyPeer)
  const options: tls.ConnectionOptions = { rejectUnauthorized: false, checkServerIdentity: noIdentityCheck };
  if (s.serverName && !net.isIP(name.replace(/^\[|\]$/g, ''))) options.servername = name;
  else options.servername = '';
  if (s.trustedCertificate) options.ca = filesOf(s).bytes(s.trustedCertificate);
  // node reads one CRL per entry; OpenSSL then checks the whole chain (CRL_CHECK_ALL), as nginx's ngx_ssl_crl asks
  if (s.crl) options.crl = crlsOf(s, s.crl);
  if (s.certificate) {
    const cert = s.certificate.evaluate(r);
    if (cert) {
      const certPath = path.resolve(s.confPrefix ?? '', cert);
      const keyPath = path.resolve(s.confPrefix ?? '', s.certificateKey ? s.certificateKey.evaluate(r) : cert);
      const loaded = clientCertificate(logError, s, certPath, keyPath);
      if (!loaded) return undefined;
      options.cert = loaded.cert;
      options.key = loaded.key.pem;
      if (loaded.key.passphrase !== undefined) options.passphrase = loaded.key.passphrase;
    }
  }
  if (s.protocols?.length) {
    const vs = s.protocols.map((p) => VERSIONS[p]).filter(Boolean);
    const order = ['TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'];
    vs.sort((a, b) => order.indexOf(a) - order.indexOf(b));
    if (vs.length) {
      options.minVersion = vs[0];
      options.maxVersion = vs[vs.length - 1];
    }
  }
  if (s.ciphers && s.ciphers !== 'DEFAULT') options.ciphers = s.ciphers;
  if (s.confCommands) {
    try {
      const override = overridePair(s.confCommands, filesOf(s));
      if (override.cert) options.cert = override.cert;
      if (override.key) options.key = override.key;
      options.secureOptions = applyOptions(s.confCommands, 0);
    } catch (err) {
      logError((err as Error).message);
      return undefined;
    }
  }
  const alpn = s.alpn?.map((v) => v.evaluate(r)).filter((p) => p.length > 0 && p.length <= 255);
  if (alpn?.length) options.ALPNProtocols = alpn;
  const sessionKey = s.sessionReuse === false ? undefined : name;
  return { options, name, verify: s.verify === true, sessionKey };
}

/** Options for connecting to one peer, with a saved session when there is one. */
export function peerOptions(t: UpstreamTls, peerName: string): tls.ConnectionOptions {
  if (!t.sessionKey) return t.options;
  const session = sessions.get(peerName + '|' + t.sessionKey);
  return session ? { ...t.options, session } : t.options;
}

/** Remembers the sessions a connection gets, for the next connection to that peer. */
export function keepSessions(t: UpstreamTls, peerName: string, socket: tls.TLSSocket): void {
  if (!t.sessionKey) return;
  const key = peerName + '|' + t.sessionKey;
  socket.on('session', (session: Buffer) => sessions.set(key, session));
}

/**
 * nginx's checks after the handshake with proxy_ssl_verify on; returns its
 * error message or undefined when the peer is acceptable.
 */
export function verifyPeer(t: UpstreamTls, socket: tls.TLSSocket, depth: number): string | undefined {
  // a resumed session carries the verification result of the handshake that made it
  if (!t.verify || socket.isSessionReused()) return undefined;
  if (!socket.authorized) {
    const err = socket.authorizationError as unknown as string | Error | undefined;
    const text = typeof err === 'string' ? err : err?.message ?? 'unknown';
    const code = VERIFY_CODES[text] ?? [0, text.toLowerCase().replace(/_/g, ' ')];
    return `upstream SSL certificate verify error: (${code[0]}:${code[1]})`;
  }
  const chain = chainLength(socket);
  if (chain - 1 > depth) return `upstream SSL certificate verify error: (22:certificate chain too long)`;
  const cert = socket.getPeerCertificate();
  if (tls.checkServerIdentity(t.name, cert) !== undefined) return `upstream SSL certificate does not match "${t.name}"`;
  return undefined;
}

function chainLength(socket: tls.TLSSocket): number {
  let n = 0;
  const seen = new Set<string>();
  let c: tls.DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
  while (c && c.raw && !seen.has(c.fingerprint256)) {
    seen.add(c.fingerprint256);
    n++;
    if (c.issuerCertificate === c) break;
    c = c.issuerCertificate;
  }
  return n;
}

/** OpenSSL verify codes and texts for node's authorizationError names. */
const VERIFY_CODES: Record<string, [number, string]> = {
  UNABLE_TO_GET_ISSUER_CERT: [2, 'unable to get issuer certificate'],
  UNABLE_TO_GET_CRL: [3, 'unable to get certificate CRL'],
  CRL_HAS_EXPIRED: [12, 'CRL has expired'],
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: [20, 'unable to get local issuer certificate'],
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: [21, 'unable to verify the first certificate'],
  DEPTH_ZERO_SELF_SIGNED_CERT: [18, 'self-signed certificate'],
  SELF_SIGNED_CERT_IN_CHAIN: [19, 'self-signed certificate in certificate chain'],
  CERT_HAS_EXPIRED: [10, 'certificate has expired'],
  CERT_NOT_YET_VALID: [9, 'certificate is not yet valid'],
  CERT_REVOKED: [23, 'certificate revoked'],
  CERT_CHAIN_TOO_LONG: [22, 'certificate chain too long'],
};

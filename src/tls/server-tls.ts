/**
 * One server block's TLS, compiled once per configuration (nginx's
 * per-server SSL_CTX): protocols, ciphers, certificates (static ones loaded
 * now; ones named by variables at handshake time, cached), the session
 * cache and ticket keys, the session id context, client verification
 * settings, OCSP stapling.
 */
import crypto from 'node:crypto';
import tls from 'node:tls';
import { ConfError } from '../conf/errors.ts';
import { CertificateCache, CertLoadError, loadCertKeyPair, pemCertificates, readPasswords, readPem } from './certificates.ts';
import type { CertKeyPair } from './certificates.ts';
import { BuiltinSessionCache, sharedSessionCache } from './session-cache.ts';
import type { SessionStore } from './session-cache.ts';
import { derivedTicketKeys, fileTicketKeys, installTicketKeys, sharedTicketKeys } from './ticket-keys.ts';
import type { TicketKeySource } from './ticket-keys.ts';
import type { ComplexValue } from '../core/variables.ts';
import type { PathValue, SessionCacheConf, SslSrvConf, VerifyMode } from './server-conf.ts';
import { crlPems, loadCrls } from './verify.ts';
import type { Crl } from './verify.ts';
import { Stapler } from './stapling.ts';
import type { StaplingOptions } from './stapling.ts';
import { OcspVerifier } from './ocsp.ts';
import { applyConfCommands, applyOptions, overridePair } from './conf-commands.ts';
import type { NativeContext } from './conf-commands.ts';
import type { OcspClientOptions } from './ocsp.ts';
import { diskFiles } from './load-files.ts';
import type { TlsFiles } from './load-files.ts';

const C = crypto.constants;
const VERSIONS = ['TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'] as const;
const NO_VERSION: Record<string, number> = {
  'TLSv1': C.SSL_OP_NO_TLSv1, 'TLSv1.1': C.SSL_OP_NO_TLSv1_1, 'TLSv1.2': C.SSL_OP_NO_TLSv1_2, 'TLSv1.3': C.SSL_OP_NO_TLSv1_3,
};

/** What the http ssl module hands over for one server block (merged values, defaults filled). */
export interface ServerTlsConfig {
  /** Where the server block is (`file:line`), naming it in errors and keys. */
  id: string;
  conf: Required<Pick<SslSrvConf, 'protocols' | 'ciphers' | 'ecdhCurve' | 'preferServerCiphers' | 'bufferSize' | 'verifyDepth' | 'sessionTickets' | 'sessionTimeout' | 'earlyData'>> & SslSrvConf & {
    verify: VerifyMode;
    sessionCache: SessionCacheConf;
  };
  stapling?: StaplingOptions;
  ocsp?: OcspClientOptions;
  /** The configuration load's files (each read once per load); the disk when left out. */
  files?: TlsFiles;
}

/**
 * A server block's ServerTls from its merged ssl_* settings (both
 * subsystems' ssl modules): stapling and OCSP use the server's resolver.
 */
export function compileServerTls(id: string, conf: SslSrvConf, resolver: string[] | undefined, resolverTimeout: number | undefined, files: TlsFiles): ServerTls {
  const c = conf as ServerTlsConfig['conf'];
  const cfg: ServerTlsConfig = { id, conf: c, files };
  if (c.stapling) {
    cfg.stapling = { file: c.staplingFile, files, responder: c.staplingResponder, verify: c.staplingVerify ?? false, resolver, resolverTimeout, warn: c.warn };
  }
  if (c.ocsp && c.ocsp !== 'off') {
    if (c.verify === 'optional_no_ca') throw new ConfError('"ssl_ocsp" is incompatible with "ssl_verify_client optional_no_ca"');
    cfg.ocsp = { mode: c.ocsp, responder: c.ocspResponder, cache: c.ocspCache || undefined, resolver, resolverTimeout };
  }
  return new ServerTls(cfg);
}

export class ServerTls {
  readonly id: string;
  readonly conf: ServerTlsConfig['conf'];
  readonly sessionStore: SessionStore | undefined;
  readonly ticketKeys: TicketKeySource | undefined;
  readonly sessionIdContext: string;
  /** `ssl_client_certificate` (sent to clients as acceptable CAs) and trusted for verification. */
  readonly clientCAs: crypto.X509Certificate[] = [];
  /** Every certificate trusted for client verification (client + trusted certificates). */
  readonly trusted: crypto.X509Certificate[] = [];
  readonly crls: Crl[];
  /** The same CRLs for the TLS context (OpenSSL's verdict on chains with intermediates only the client sent). */
  private readonly crlPem: string[];
  readonly hasCertificates: boolean;
  readonly variableCertificates: boolean;
  readonly stapler: Stapler | undefined;
  readonly ocsp: OcspVerifier | undefined;
  private readonly passwords: string[] | undefined;
  private readonly clientCaPem: string[] = [];
  private readonly dhparam: string | undefined;
  private staticContext: tls.SecureContext | undefined;
  private readonly certCache: CertificateCache | undefined;
  private readonly files: TlsFiles;
  private readonly contexts: ContextNode = { next: new WeakMap() };
  /** Pairs loaded at configuration time (static certificates). */
  readonly staticPairs: CertKeyPair[] = [];

  constructor(cfg: ServerTlsConfig) {
    this.id = cfg.id;
    const files = (this.files = cfg.files ?? diskFiles);
    const c = cfg.conf;
    this.conf = c;
    const certs = c.certificates ?? [];
    const keys = c.certificateKeys ?? [];
    if (certs.length && keys.length < certs.length) {
      throw new ConfError(`no "ssl_certificate_key" is defined for certificate "${certs[certs.length - 1].path}"`);
    }
    this.hasCertificates = certs.length > 0;
    this.variableCertificates = certs.some((v) => v.complex) || keys.some((v) => v.complex);
    this.passwords = c.passwordFile ? wrap(() => readPasswords(c.passwordFile!, c.passwordText)) : undefined;
    this.dhparam = c.dhparam ? wrap(() => readPem(c.dhparam!, 'DH parameters', files)) : undefined;
    if (c.verify !== 'off' && c.verify !== 'optional_no_ca' && !c.clientCertificate && !c.trustedCertificate) {
      throw new ConfError('no ssl_client_certificate or ssl_trusted_certificate for ssl_verify_client');
    }
    if (c.verify !== 'off' && c.clientCertificate) {
      const seen = new Set<string>();
      for (const pem of pemCertificates(wrap(() => readPem(c.clientCertificate!, 'certificate', files)))) {
        const x = new crypto.X509Certificate(pem);
        if (seen.has(x.fingerprint256)) continue;
        seen.add(x.fingerprint256);
        this.clientCAs.push(x);
        this.clientCaPem.push(pem);
      }
    }
    this.trusted.push(...this.clientCAs);
    if (c.trustedCertificate) {
      for (const pem of pemCertificates(wrap(() => readPem(c.trustedCertificate!, 'certificate', files)))) this.trusted.push(new crypto.X509Certificate(pem));
    }
    this.crls = c.crl ? wrap(() => loadCrls(c.crl!, files)) : [];
    this.crlPem = c.crl && c.verify !== 'off' ? crlPems(c.crl, files) : [];
    this.sessionIdContext = crypto.createHash('sha1')
      .update('HTTP')
      .update(certs.map((v) => (v.complex ? v.path : fileText(v.path, files))).join('\0'))
      .update(this.clientCaPem.join(''))
      .digest('hex').slice(0, 32);
    this.sessionStore = sessionStore(c.sessionCache);
    this.ticketKeys = !c.sessionTickets ? undefined
      : c.sessionTicketKeys?.length ? fileTicketKeys(c.sessionTicketKeys, files)
        : c.sessionCache.shared ? sharedTicketKeys(sharedSessionCache(c.sessionCache.shared.name, c.sessionCache.shared.size), c.sessionTimeout)
          : derivedTicketKeys(`${this.id}|${this.sessionIdContext}`);
    if (this.variableCertificates) {
      const cc = c.certificateCache;
      this.certCache = cc === false ? undefined : new CertificateCache(cc?.max ?? 1000, cc?.valid ?? 60_000, cc?.inactive ?? 10_000);
    } else if (this.hasCertificates) {
      for (let i = 0; i < certs.length; i++) {
        this.staticPairs.push(wrap(() => loadCertKeyPair(certs[i].path, keys[i].path, this.passwords, files)));
      }
      this.staticContext = this.build(this.staticPairs);
    }
    this.stapler = cfg.stapling && this.hasCertificates ? new Stapler(cfg.stapling, this.staticPairs, this.trusted) : undefined;
    this.ocsp = cfg.ocsp ? new OcspVerifier(cfg.ocsp, this.trusted) : undefined;
  }

  /**
   * The TLS context for a handshake. Certificates named by variables are
   * resolved with `evaluate` and loaded (cached); a failure throws
   * CertLoadError (the handshake fails, as nginx's certificate callback does).
   */
  contextFor(evaluate: (cv: ComplexValue) => string): tls.SecureContext {
    if (this.staticContext) return this.staticContext;
    const certs = this.conf.certificates ?? [];
    const keys = this.conf.certificateKeys ?? [];
    const paths: Array<[string, string]> = certs.map((cv, i) => [resolvePath(cv, evaluate), resolvePath(keys[i], evaluate)]);
    const pairs = paths.map(([c, k]) => (this.certCache ? this.certCache.pair(c, k, this.passwords) : loadCertKeyPair(c, k, this.passwords)));
    // one context per combination of cached pairs (ssl_certificate_cache off: a new one every time, as nginx loads)
    let node = this.contexts;
    for (const p of pairs) {
      let next = node.next.get(p);
      if (!next) node.next.set(p, (next = { next: new WeakMap() }));
      node = next;
    }
    if (!node.ctx) node.ctx = this.build(pairs);
    return node.ctx;
  }

  /** The SSL_CTX equivalent for these certificate pairs. */
  private build(pairs: CertKeyPair[]): tls.SecureContext {
    const c = this.conf;
    const enabled = VERSIONS.filter((v) => c.protocols.includes(v));
    let secureOptions = C.SSL_OP_NO_RENEGOTIATION;
    if (!c.sessionTickets) secureOptions |= C.SSL_OP_NO_TICKET;
    if (c.preferServerCiphers) secureOptions |= C.SSL_OP_CIPHER_SERVER_PREFERENCE;
    const min = enabled[0] ?? 'TLSv1.3';
    const max = enabled[enabled.length - 1] ?? 'TLSv1.3';
    for (const v of VERSIONS) {
      if (VERSIONS.indexOf(v) > VERSIONS.indexOf(min) && VERSIONS.indexOf(v) < VERSIONS.indexOf(max) && !enabled.includes(v)) secureOptions |= NO_VERSION[v];
    }
    const override = overridePair(c.confCommands, this.files);
    let ctx: tls.SecureContext;
    try {
      ctx = tls.createSecureContext({
        cert: override.cert ?? pairs.map((p) => p.certPem),
        key: override.key ?? pairs.map((p) => p.keyPem),
        ca: this.clientCaPem.length ? this.clientCaPem : undefined,
        crl: this.crlPem.length ? this.crlPem : undefined,
        minVersion: min,
        maxVersion: max,
        secureOptions: applyOptions(c.confCommands, secureOptions),
        ecdhCurve: c.ecdhCurve,
        dhparam: this.dhparam,
        sessionTimeout: c.sessionTimeout,
      });
    } catch (err) {
      const msg = (err as Error).message;
      if (/curve|group/i.test(msg)) throw new ConfError(`SSL_CTX_set1_curves_list("${c.ecdhCurve}") failed (SSL: ${msg})`);
      if (/dh/i.test(msg)) throw new ConfError(`PEM_read_bio_DHparams("${c.dhparam}") failed (SSL: ${msg})`);
      throw new ConfError(`SSL_CTX_use_certificate("${pairs[0]?.certPath}") failed (SSL: ${msg})`);
    }
    const native = (ctx as unknown as { context: NativeContext }).context;
    try {
      native.setCiphers(c.ciphers);
    } catch {
      throw new ConfError(`SSL_CTX_set_cipher_list("${c.ciphers}") failed (SSL: error:0A0000B9:SSL routines::no cipher match)`);
    }
    native.setSessionIdContext(this.sessionIdContext);
    applyConfCommands(native, c.confCommands);
    if (this.ticketKeys) installTicketKeys(ctx, this.ticketKeys);
    return ctx;
  }
}

/** Contexts built for certificates named by variables, by their pairs in order. */
interface ContextNode {
  next: WeakMap<CertKeyPair, ContextNode>;
  ctx?: tls.SecureContext;
}

function resolvePath(v: PathValue, evaluate: (cv: ComplexValue) => string): string {
  if (!v.complex) return v.path;
  const p = evaluate(v.complex);
  if (p.startsWith('data:') || p.startsWith('/')) return p;
  return v.confPrefix + p;
}

function sessionStore(c: SessionCacheConf): SessionStore | undefined {
  if (c.off) return undefined;
  if (c.shared) return sharedSessionCache(c.shared.name, c.shared.size);
  if (c.builtin) return new BuiltinSessionCache(c.builtin);
  return undefined;
}

function fileText(path: string, files: TlsFiles): string {
  try {
    return path.startsWith('data:') ? path : files.text(path);
  } catch {
    return path;
  }
}

/** Turns a load error into a configuration error (nginx's [emerg] at startup/reload). */
function wrap<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof CertLoadError) throw new ConfError(err.message);
    throw err;
  }
}

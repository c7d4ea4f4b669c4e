/**
 * Client certificate verification, done the way OpenSSL does it for nginx
 * but after the handshake (nginx's verify callback accepts every chain and
 * decides per request, answering 495/496): build the chain from the
 * client's certificates to a trusted one (`ssl_client_certificate` +
 * `ssl_trusted_certificate`), check signatures, validity, CA flags,
 * `ssl_verify_depth` (OpenSSL ≥ 1.1 counts intermediates: depth N allows N)
 * and `ssl_crl` (every certificate of the chain), then OCSP (`ssl_ocsp`).
 * Results carry OpenSSL's X509_V_ERR codes and texts, which nginx prints in
 * `$ssl_client_verify` and its log.
 */
import crypto from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import { ConfError } from '../conf/errors.ts';
import { derChildren, readDer } from './der.ts';
import type { Der } from './der.ts';
import { readPem } from './certificates.ts';
import { peerCertificates } from './peer-chain.ts';
import type { TlsFiles } from './load-files.ts';
import type { SslSrvConf } from './server-conf.ts';
import { certFields, issued, selfSigned, verifySignature } from './x509.ts';

/** X509_verify_cert_error_string() of OpenSSL 3. */
const REASONS: Record<number, string> = {
  0: 'ok',
  2: 'unable to get issuer certificate',
  3: 'unable to get certificate CRL',
  7: 'certificate signature failure',
  8: 'CRL signature failure',
  9: 'certificate is not yet valid',
  10: 'certificate has expired',
  11: 'CRL is not yet valid',
  12: 'CRL has expired',
  18: 'self-signed certificate',
  19: 'self-signed certificate in certificate chain',
  20: 'unable to get local issuer certificate',
  21: 'unable to verify the first certificate',
  22: 'certificate chain too long',
  23: 'certificate revoked',
  24: 'invalid CA certificate',
};

function fail(code: number): ClientVerifyResult {
  return { code, reason: REASONS[code] ?? 'certificate verify error' };
}

/** nginx's view of the client certificate check (SSL_get_verify_result plus OCSP). */
export interface ClientVerifyResult {
  /** 0 = X509_V_OK, else OpenSSL's X509_V_ERR_* code. */
  code: number;
  /** X509_verify_cert_error_string(code), or the OCSP failure text. */
  reason: string;
  /** An OCSP check failed (`certificate status request failed`, `certificate revoked`, ...). */
  ocspFailed?: boolean;
}

/** Errors `ssl_verify_client optional_no_ca` lets through (ngx_ssl_verify_error_optional). */
export function isOptionalVerifyError(code: number): boolean {
  return code === 18 || code === 19 || code === 20 || code === 21 || code === 27;
}

export interface Crl {
  issuer: Buffer;
  thisUpdate: number;
  nextUpdate: number | undefined;
  revoked: Set<string>;
  tbs: Buffer;
  algorithm: Der;
  signature: Der;
}

function derTime(el: Der): number {
  const s = el.value.toString('latin1');
  // UTCTime YYMMDDHHMMSSZ or GeneralizedTime YYYYMMDDHHMMSSZ
  const full = el.tag === 0x17 ? (Number(s.slice(0, 2)) >= 50 ? '19' : '20') + s : s;
  return Date.UTC(Number(full.slice(0, 4)), Number(full.slice(4, 6)) - 1, Number(full.slice(6, 8)),
    Number(full.slice(8, 10)), Number(full.slice(10, 12)), Number(full.slice(12, 14)));
}

export { derTime };

/** Reads every CRL (PEM or DER) of an `ssl_crl` file. */
export function loadCrls(path: string, files?: TlsFiles): Crl[] {
  const text = readPem(path, 'CRL', files);
  const blocks = text.match(/-----BEGIN X509 CRL-----[\s\S]+?-----END X509 CRL-----/g);
  const ders = blocks ? blocks.map((b) => Buffer.from(b.replace(/-----[^-]+-----|\s/g, ''), 'base64')) : [Buffer.from(text, 'latin1')];
  return ders.map((der) => {
    try {
      const [list] = readDer(der);
      const [tbs, algorithm, signature] = derChildren(list);
      const f = derChildren(tbs);
      let i = f[0].tag === 0x02 ? 1 : 0;
      i++; // signature algorithm
      const issuer = f[i++].raw;
      const thisUpdate = derTime(f[i++]);
      let nextUpdate: number | undefined;
      if (f[i] && (f[i].tag === 0x17 || f[i].tag === 0x18)) nextUpdate = derTime(f[i++]);
      const revoked = new Set<string>();
      if (f[i] && f[i].tag === 0x30) for (const entry of derChildren(f[i])) revoked.add(derChildren(entry)[0].value.toString('hex'));
      return { issuer, thisUpdate, nextUpdate, revoked, tbs: tbs.raw, algorithm, signature };
    } catch {
      throw new ConfError(`X509_load_cert_crl_file("${path}") failed (SSL: error:0680007B:asn1 encoding routines::header too long)`);
    }
  });
}

/**
 * The CRL check of one certificate (OpenSSL's check_cert with CRL_CHECK_ALL):
 * the errors it reports, in order. `issuer` is undefined at the top of a
 * chain that found no issuer (the CRL's signature cannot be checked there).
 */
function crlErrors(cert: crypto.X509Certificate, issuer: crypto.X509Certificate | undefined, crls: Crl[], now: number): number[] {
  const name = certFields(cert).issuer;
  const named = crls.filter((c) => c.issuer.equals(name));
  if (!named.length) return [3];
  const out: number[] = [];
  let crl = issuer ? named.find((c) => verifySignature(c.algorithm, c.tbs, c.signature, issuer.publicKey)) : named[0];
  if (!crl) {
    out.push(8);
    crl = named[0];
  }
  if (crl.thisUpdate > now) out.push(11);
  if (crl.nextUpdate !== undefined && crl.nextUpdate < now) out.push(12);
  if (crl.revoked.has(certFields(cert).serial.toString('hex'))) out.push(23);
  return out;
}

/**
 * Builds and checks the chain of `leaf`; returns the chain (leaf first) and
 * the result. nginx's verify callback lets OpenSSL go on after each error,
 * so the result is the last error of X509_verify_cert's steps in their
 * order: building the chain (with the depth limit), CA flags, CRLs (from the
 * leaf up), then signatures and validity dates (from the top down).
 */
export function verifyChain(leaf: crypto.X509Certificate, untrusted: crypto.X509Certificate[], trusted: crypto.X509Certificate[],
  depth: number, crls: Crl[]): { chain: crypto.X509Certificate[]; result: ClientVerifyResult } {
  const chain = [leaf];
  const isTrusted = (c: crypto.X509Certificate) => trusted.some((t) => t.fingerprint256 === c.fingerprint256);
  let anchored = isTrusted(leaf);
  let error = 0;
  for (;;) {
    const top = chain[chain.length - 1];
    if (selfSigned(top)) {
      if (!anchored) error = chain.length === 1 ? 18 : 19;
      break;
    }
    const issuer = trusted.find((t) => issued(t, top)) ?? untrusted.find((u) => issued(u, top) && !chain.includes(u));
    // OpenSSL stops building at the depth limit (N intermediates for depth N): the top then lacks its issuer,
    // "unable to get issuer certificate" when the chain has a trusted one, else "... local issuer ..."
    if (!issuer || chain.length + 1 > depth + 2) {
      error = anchored ? 2 : 20;
      break;
    }
    chain.push(issuer);
    if (isTrusted(issuer)) anchored = true;
  }
  const top = chain[chain.length - 1];
  const complete = selfSigned(top);
  for (let i = 1; i < chain.length; i++) if (!chain[i].ca && !selfSigned(chain[i])) error = 24;
  const now = Date.now();
  if (crls.length) {
    for (let i = 0; i < chain.length; i++) {
      const issuer = i + 1 < chain.length ? chain[i + 1] : complete ? top : undefined;
      for (const code of crlErrors(chain[i], issuer, crls, now)) error = code;
    }
  }
  // a lone certificate without its issuer: its signature cannot be checked
  if (!complete && chain.length === 1) error = 21;
  for (let i = complete || chain.length === 1 ? chain.length - 1 : chain.length - 2; i >= 0; i--) {
    const c = chain[i];
    if (Date.parse(c.validFrom) > now) error = 9;
    if (Date.parse(c.validTo) < now) error = 10;
  }
  return { chain, result: error ? fail(error) : { code: 0, reason: 'ok' } };
}

/** Node's names of X509_V_ERR codes (verifyError().code) → the codes. */
const CODES_BY_NAME: Record<string, number> = {
  UNABLE_TO_GET_ISSUER_CERT: 2, UNABLE_TO_GET_CRL: 3, CERT_SIGNATURE_FAILURE: 7, CRL_SIGNATURE_FAILURE: 8,
  CERT_NOT_YET_VALID: 9, CERT_HAS_EXPIRED: 10, CRL_NOT_YET_VALID: 11, CRL_HAS_EXPIRED: 12,
  DEPTH_ZERO_SELF_SIGNED_CERT: 18, SELF_SIGNED_CERT_IN_CHAIN: 19, UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 20,
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 21, CERT_CHAIN_TOO_LONG: 22, CERT_REVOKED: 23, INVALID_CA: 24,
};

/**
 * OpenSSL's own verdict on the client's chain, for a resumed session whose
 * chain is not known here (made in another worker): the session keeps the
 * client's certificate but not the chain it sent, and
 * OpenSSL keeps the verdict of the full handshake (made with
 * `ssl_client_certificate` and `ssl_crl` in the context, as nginx's), which
 * nginx reports for resumed sessions too. OpenSSL made it without the depth
 * limit (Node cannot set SSL_CTX_set_verify_depth): a full handshake over
 * the limit fails in Gatehouse's own check, and its session is forgotten.
 */
function opensslVerdict(socket: TLSSocket): ClientVerifyResult | undefined {
  const handle = (socket as unknown as { _handle?: { verifyError?(): { code?: string } | null } })._handle;
  if (!handle?.verifyError) return undefined;
  const err = handle.verifyError();
  if (!err) return { code: 0, reason: 'ok' };
  const code = err.code ? CODES_BY_NAME[err.code] : undefined;
  return code === undefined ? undefined : fail(code);
}

/** What the client certificate check reads from a server block's TLS settings (a ServerTls). */
export interface ClientVerifySettings {
  readonly conf: Pick<SslSrvConf, 'verify'> & { verifyDepth: number };
  readonly trusted: crypto.X509Certificate[];
  readonly crls: Crl[];
  /** `ssl_ocsp`: the chain's OCSP check. */
  readonly ocsp: { check(chain: crypto.X509Certificate[]): Promise<ClientVerifyResult> } | undefined;
}

/** Verifies the client certificate of a finished handshake (undefined when none was asked for or sent). */
export async function verifyClient(settings: ClientVerifySettings, socket: TLSSocket): Promise<ClientVerifyResult | undefined> {
  if (settings.conf.verify === 'off') return undefined;
  const peer = peerCertificates(socket);
  if (!peer) return undefined;
  const { chain, result } = verifyChain(peer.leaf, [...peer.sent], settings.trusted, settings.conf.verifyDepth, settings.crls);
  // a resumed session whose chain this worker has not seen: OCSP would need the intermediates, so not with ssl_ocsp
  if ((result.code === 20 || result.code === 21) && peer.sent.length === 0 && socket.isSessionReused() && !settings.ocsp) return opensslVerdict(socket) ?? result;
  if (result.code !== 0 || !settings.ocsp) return result;
  return settings.ocsp.check(chain);
}

/** The CRLs of an `ssl_crl` file as PEM (for the TLS context, so OpenSSL's verdict checks them too). */
export function crlPems(path: string, files?: TlsFiles): string[] {
  const text = readPem(path, 'CRL', files);
  const blocks = text.match(/-----BEGIN X509 CRL-----[\s\S]+?-----END X509 CRL-----/g);
  if (blocks) return blocks.map((b) => `${b}\n`);
  const b64 = Buffer.from(text, 'latin1').toString('base64').replace(/.{64}/g, '$&\n');
  return [`-----BEGIN X509 CRL-----\n${b64}${b64.endsWith('\n') ? '' : '\n'}-----END X509 CRL-----\n`];
}

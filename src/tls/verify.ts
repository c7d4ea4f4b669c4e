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
export function loadCrls(path: string): Crl[] {
  const text = readPem(path, 'CRL');
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

/** The client's certificates after the leaf, as the handshake delivered them. */
function peerChain(socket: TLSSocket): crypto.X509Certificate[] {
  const out: crypto.X509Certificate[] = [];
  let c = socket.getPeerCertificate(true) as { raw?: Buffer; issuerCertificate?: unknown } | undefined;
  const seen = new Set<unknown>();
  while (c && c.raw && !seen.has(c)) {
    seen.add(c);
    if (out.length || seen.size > 1) out.push(new crypto.X509Certificate(c.raw));
    c = c.issuerCertificate as typeof c;
  }
  return out;
}

function checkCrl(cert: crypto.X509Certificate, issuer: crypto.X509Certificate, crls: Crl[], now: number): number {
  const name = certFields(cert).issuer;
  const crl = crls.find((c) => c.issuer.equals(name) && verifySignature(c.algorithm, c.tbs, c.signature, issuer.publicKey));
  if (!crl) return 3;
  if (crl.thisUpdate > now) return 11;
  if (crl.nextUpdate !== undefined && crl.nextUpdate < now) return 12;
  return crl.revoked.has(certFields(cert).serial.toString('hex')) ? 23 : 0;
}

/** Builds and checks the chain of `leaf`; returns the chain (leaf first) and the result. */
export function verifyChain(leaf: crypto.X509Certificate, untrusted: crypto.X509Certificate[], trusted: crypto.X509Certificate[],
  depth: number, crls: Crl[]): { chain: crypto.X509Certificate[]; result: ClientVerifyResult } {
  const chain = [leaf];
  const isTrusted = (c: crypto.X509Certificate) => trusted.some((t) => t.fingerprint256 === c.fingerprint256);
  let anchored = isTrusted(leaf);
  let error = 0;
  for (;;) {
    const top = chain[chain.length - 1];
    if (selfSigned(top)) break;
    const issuer = trusted.find((t) => issued(t, top)) ?? untrusted.find((u) => issued(u, top) && !chain.includes(u));
    if (!issuer) {
      error = anchored ? 2 : 20;
      break;
    }
    // OpenSSL stops building at the depth limit: a trusted top then lacks its issuer
    if (chain.length + 1 > depth + 2) return { chain, result: fail(anchored ? 2 : 22) };
    chain.push(issuer);
    if (isTrusted(issuer)) anchored = true;
  }
  if (!error && !anchored) error = chain.length === 1 ? 18 : 19;
  if (error) return { chain, result: fail(error) };
  const now = Date.now();
  for (let i = 0; i < chain.length; i++) {
    const c = chain[i];
    if (Date.parse(c.validFrom) > now) return { chain, result: fail(9) };
    if (Date.parse(c.validTo) < now) return { chain, result: fail(10) };
    if (i > 0 && !c.ca && !selfSigned(c)) return { chain, result: fail(24) };
  }
  if (crls.length) {
    for (let i = 0; i + 1 < chain.length; i++) {
      const rc = checkCrl(chain[i], chain[i + 1], crls, now);
      if (rc) return { chain, result: fail(rc) };
    }
  }
  return { chain, result: { code: 0, reason: 'ok' } };
}

/** Node's names of X509_V_ERR codes (verifyError().code) → the codes. */
const CODES_BY_NAME: Record<string, number> = {
  UNABLE_TO_GET_ISSUER_CERT: 2, UNABLE_TO_GET_CRL: 3, CERT_SIGNATURE_FAILURE: 7, CRL_SIGNATURE_FAILURE: 8,
  CERT_NOT_YET_VALID: 9, CERT_HAS_EXPIRED: 10, CRL_NOT_YET_VALID: 11, CRL_HAS_EXPIRED: 12,
  DEPTH_ZERO_SELF_SIGNED_CERT: 18, SELF_SIGNED_CERT_IN_CHAIN: 19, UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 20,
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 21, CERT_CHAIN_TOO_LONG: 22, CERT_REVOKED: 23, INVALID_CA: 24,
};

/**
 * OpenSSL's own verdict on the client's chain (made during the handshake
 * with `ssl_client_certificate` and `ssl_crl` in the context, as nginx's),
 * for chains whose intermediates only the client sent: Node 24 does not
 * hand those to JavaScript (getPeerCertificate(true) has the leaf alone).
 * OpenSSL runs without nginx's depth limit there, and nginx reports a chain
 * over the limit as "unable to get local issuer certificate": with at least
 * one intermediate, `ssl_verify_depth 0` fails so; deeper limits are not
 * enforced on such chains (docs/tls.md).
 */
function opensslVerdict(socket: TLSSocket, depth: number): ClientVerifyResult | undefined {
  const handle = (socket as unknown as { _handle?: { verifyError?(): { code?: string } | null } })._handle;
  if (!handle?.verifyError) return undefined;
  const err = handle.verifyError();
  if (!err) return depth < 1 ? fail(20) : { code: 0, reason: 'ok' };
  const code = err.code ? CODES_BY_NAME[err.code] : undefined;
  return code === undefined || code === 20 ? undefined : fail(code);
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
  const leaf = socket.getPeerX509Certificate();
  if (!leaf) return undefined;
  const sent = peerChain(socket);
  const { chain, result } = verifyChain(leaf, sent, settings.trusted, settings.conf.verifyDepth, settings.crls);
  // the issuer may be an intermediate the client sent but Node did not pass on; OCSP would need it, so not with ssl_ocsp
  if (result.code === 20 && sent.length === 0 && !settings.ocsp) return opensslVerdict(socket, settings.conf.verifyDepth) ?? result;
  if (result.code !== 0 || !settings.ocsp) return result;
  return settings.ocsp.check(chain);
}

/** The CRLs of an `ssl_crl` file as PEM (for the TLS context, so OpenSSL's verdict checks them too). */
export function crlPems(path: string): string[] {
  const text = readPem(path, 'CRL');
  const blocks = text.match(/-----BEGIN X509 CRL-----[\s\S]+?-----END X509 CRL-----/g);
  if (blocks) return blocks.map((b) => `${b}\n`);
  const b64 = Buffer.from(text, 'latin1').toString('base64').replace(/.{64}/g, '$&\n');
  return [`-----BEGIN X509 CRL-----\n${b64}${b64.endsWith('\n') ? '' : '\n'}-----END X509 CRL-----\n`];
}

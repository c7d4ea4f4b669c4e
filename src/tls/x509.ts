/**
 * Certificate helpers over node:crypto's X509Certificate: issuer links,
 * signature checks of DER structures (CRLs, OCSP responses) by algorithm
 * OID, and the certificate fields X509Certificate does not expose (raw
 * issuer/subject names, the public key bit string, the serial number).
 */
import crypto from 'node:crypto';
import { derChildren, oidText, readDer } from './der.ts';
import type { Der } from './der.ts';

/** Signature algorithm OIDs → the digest node:crypto.verify wants (null: the key type decides). */
const SIG_DIGESTS: Record<string, string | null> = {
  '1.2.840.113549.1.1.5': 'sha1', '1.2.840.113549.1.1.11': 'sha256', '1.2.840.113549.1.1.12': 'sha384',
  '1.2.840.113549.1.1.13': 'sha512', '1.2.840.113549.1.1.14': 'sha224', '1.2.840.10045.4.1': 'sha1',
  '1.2.840.10045.4.3.1': 'sha224', '1.2.840.10045.4.3.2': 'sha256', '1.2.840.10045.4.3.3': 'sha384',
  '1.2.840.10045.4.3.4': 'sha512', '1.3.101.112': null, '1.3.101.113': null,
};
const PSS = '1.2.840.113549.1.1.10';

/** Verifies `signature` over `data` with `key`, the algorithm given as a DER AlgorithmIdentifier. */
export function verifySignature(algorithm: Der, data: Buffer, signatureBits: Der, key: crypto.KeyObject): boolean {
  try {
    const [oid, params] = derChildren(algorithm);
    const name = oidText(oid.value);
    const sig = signatureBits.value.subarray(1);
    if (name === PSS) {
      // RSASSA-PSS parameters: [0] hash, [1] mgf, [2] salt length
      let hash = 'sha1';
      let salt = 20;
      for (const p of params ? derChildren(params) : []) {
        if (p.tag === 0xa0) hash = DIGEST_OIDS[oidText(derChildren(derChildren(p)[0])[0].value)] ?? hash;
        if (p.tag === 0xa2) salt = derChildren(p)[0].value.readUIntBE(0, derChildren(p)[0].value.length);
      }
      return crypto.verify(hash, data, { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: salt }, sig);
    }
    if (!(name in SIG_DIGESTS)) return false;
    return crypto.verify(SIG_DIGESTS[name], data, key, sig);
  } catch {
    return false;
  }
}

const DIGEST_OIDS: Record<string, string> = {
  '1.3.14.3.2.26': 'sha1', '2.16.840.1.101.3.4.2.1': 'sha256', '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512', '2.16.840.1.101.3.4.2.4': 'sha224',
};

export function digestName(oid: string): string | undefined {
  return DIGEST_OIDS[oid];
}

export interface CertFields {
  serial: Buffer;
  issuer: Buffer;
  subject: Buffer;
  /** The subjectPublicKey BIT STRING contents (without the unused-bits byte), for OCSP key hashes. */
  publicKeyBits: Buffer;
  /** Extensions by OID: [critical, value]. */
  extensions: Map<string, Buffer>;
}

const fieldsCache = new WeakMap<crypto.X509Certificate, CertFields>();

/** Fields of a certificate's tbsCertificate. */
export function certFields(cert: crypto.X509Certificate): CertFields {
  let f = fieldsCache.get(cert);
  if (f) return f;
  const [c] = readDer(cert.raw);
  const [tbs] = derChildren(c);
  const items = derChildren(tbs);
  const s = items[0].tag === 0xa0 ? 1 : 0;
  const spki = derChildren(items[s + 5]);
  const extensions = new Map<string, Buffer>();
  for (const it of items.slice(s + 6)) {
    if (it.tag !== 0xa3) continue;
    for (const ext of derChildren(derChildren(it)[0])) {
      const parts = derChildren(ext);
      extensions.set(oidText(parts[0].value), parts[parts.length - 1].value);
    }
  }
  f = {
    serial: items[s].value,
    issuer: items[s + 2].raw,
    subject: items[s + 4].raw,
    publicKeyBits: spki[1].value.subarray(1),
    extensions,
  };
  fieldsCache.set(cert, f);
  return f;
}

/** Whether `issuer` issued `cert` (names match and the signature verifies). */
export function issued(issuer: crypto.X509Certificate, cert: crypto.X509Certificate): boolean {
  return cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
}

export function selfSigned(cert: crypto.X509Certificate): boolean {
  return issued(cert, cert);
}

/** The OCSP responder URLs in a certificate's Authority Information Access. */
export function ocspUrls(cert: crypto.X509Certificate): string[] {
  const info = cert.infoAccess ?? '';
  const out: string[] = [];
  for (const line of info.split('\n')) {
    const m = /^OCSP - URI:(\S+)/.exec(line.trim());
    if (m) out.push(m[1]);
  }
  return out;
}

/** Whether the certificate may sign OCSP responses for its issuer (extendedKeyUsage OCSPSigning). */
export function hasOcspSigning(cert: crypto.X509Certificate): boolean {
  return (cert.keyUsage ?? []).includes('1.3.6.1.5.5.7.3.9');
}

/**
 * RFC 8555 §6.2 requests signed with the account key (JWS, flattened JSON),
 * RFC 7638 key thumbprints, and the external account binding of §7.3.4
 * (a JWS over the account key, MACed with the CA's HS256 key).
 */
import crypto from 'node:crypto';

/** `account_key` / `key=` values: ecdsa:256|384|521, rsa:2048|3072|4096, or a PEM file. */
export type KeySpec = { type: 'ecdsa'; bits: 256 | 384 | 521 } | { type: 'rsa'; bits: 2048 | 3072 | 4096 } | { type: 'file'; path: string };

const CURVES = { 256: 'prime256v1', 384: 'secp384r1', 521: 'secp521r1' } as const;

export function generateKey(spec: KeySpec): crypto.KeyObject {
  if (spec.type === 'ecdsa') return crypto.generateKeyPairSync('ec', { namedCurve: CURVES[spec.bits] }).privateKey;
  if (spec.type === 'rsa') return crypto.generateKeyPairSync('rsa', { modulusLength: spec.bits }).privateKey;
  throw new Error('cannot generate this key');
}

export function keyPem(key: crypto.KeyObject): string {
  return key.export({ type: 'pkcs8', format: 'pem' }) as string;
}

export const b64u = (b: Buffer | string): string => Buffer.from(b).toString('base64url');

/** The public JWK with only the members RFC 7638 hashes, in its order. */
export function publicJwk(key: crypto.KeyObject): Record<string, string> {
  const j = crypto.createPublicKey(key).export({ format: 'jwk' });
  if (j.kty === 'EC') return { crv: j.crv!, kty: 'EC', x: j.x!, y: j.y! };
  if (j.kty === 'RSA') return { e: j.e!, kty: 'RSA', n: j.n! };
  throw new Error(`unsupported account key type ${j.kty}`);
}

export function thumbprint(key: crypto.KeyObject): string {
  return b64u(crypto.createHash('sha256').update(JSON.stringify(publicJwk(key))).digest());
}

function algorithm(key: crypto.KeyObject): { alg: string; digest: string } {
  if (key.asymmetricKeyType === 'rsa') return { alg: 'RS256', digest: 'sha256' };
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (curve === 'secp384r1') return { alg: 'ES384', digest: 'sha384' };
  if (curve === 'secp521r1') return { alg: 'ES512', digest: 'sha512' };
  return { alg: 'ES256', digest: 'sha256' };
}

/** A request body: `payload` undefined is POST-as-GET (an empty payload). */
export function signRequest(key: crypto.KeyObject, url: string, nonce: string, payload: unknown, kid: string | undefined): string {
  const { alg, digest } = algorithm(key);
  const header: Record<string, unknown> = { alg, nonce, url };
  if (kid) header.kid = kid;
  else header.jwk = publicJwk(key);
  const protectedPart = b64u(JSON.stringify(header));
  const payloadPart = payload === undefined ? '' : b64u(JSON.stringify(payload));
  const signature = crypto.sign(digest, Buffer.from(`${protectedPart}.${payloadPart}`), { key, dsaEncoding: 'ieee-p1363' });
  return JSON.stringify({ protected: protectedPart, payload: payloadPart, signature: b64u(signature) });
}

/** The `externalAccountBinding` member of a newAccount request. */
export function externalAccountBinding(key: crypto.KeyObject, kid: string, macKey: Buffer, url: string): unknown {
  const protectedPart = b64u(JSON.stringify({ alg: 'HS256', kid, url }));
  const payloadPart = b64u(JSON.stringify(publicJwk(key)));
  const signature = crypto.createHmac('sha256', macKey).update(`${protectedPart}.${payloadPart}`).digest();
  return { protected: protectedPart, payload: payloadPart, signature: b64u(signature) };
}

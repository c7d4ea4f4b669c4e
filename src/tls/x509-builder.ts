/**
 * Writing the few X.509 structures Gatehouse makes itself: a certificate
 * signing request (PKCS#10) with the names in subjectAltName, and a
 * self-signed certificate (the placeholder served before an ACME
 * certificate exists, and RFC 8737's tls-alpn-01 certificate with its
 * critical acmeIdentifier extension). Node signs; this file only lays out
 * the DER.
 */
import crypto from 'node:crypto';
import net from 'node:net';
import { addressBytes } from '../core/inet.ts';
import { der } from './der.ts';

const seq = (...c: Buffer[]) => der(0x30, ...c);
const set = (...c: Buffer[]) => der(0x31, ...c);
const octets = (b: Buffer) => der(0x04, b);
const bitString = (b: Buffer) => der(0x03, Buffer.from([0]), b);
const utf8 = (s: string) => der(0x0c, Buffer.from(s, 'utf8'));

function integer(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  const v = b.subarray(i);
  return der(0x02, v[0] & 0x80 ? Buffer.concat([Buffer.from([0]), v]) : v);
}

function oid(text: string): Buffer {
  const parts = text.split('.').map(Number);
  const out = [parts[0] * 40 + parts[1]];
  for (const p of parts.slice(2)) {
    const chunk = [p & 0x7f];
    for (let v = Math.floor(p / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift(0x80 | (v & 0x7f));
    out.push(...chunk);
  }
  return der(0x06, Buffer.from(out));
}

function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z';
  // UTCTime until 2049, GeneralizedTime after (RFC 5280 4.1.2.5)
  return d.getUTCFullYear() < 2050 ? der(0x17, Buffer.from(iso.slice(2), 'latin1')) : der(0x18, Buffer.from(iso, 'latin1'));
}

function commonName(cn: string | undefined): Buffer {
  return cn === undefined ? seq() : seq(set(seq(oid('2.5.4.3'), utf8(cn))));
}

/** subjectAltName's GeneralNames: dNSName [2] or iPAddress [7]. */
function altNames(names: string[]): Buffer {
  return seq(...names.map((n) => {
    if (!net.isIP(n)) return der(0x82, Buffer.from(n, 'latin1'));
    return der(0x87, Buffer.from(addressBytes(n)!));
  }));
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return critical ? seq(oid(id), der(0x01, Buffer.from([0xff])), octets(value)) : seq(oid(id), octets(value));
}

/** The signature algorithm for a key and the digest Node signs with. */
function algorithmOf(key: crypto.KeyObject): { id: Buffer; digest: string } {
  if (key.asymmetricKeyType === 'rsa') return { id: seq(oid('1.2.840.113549.1.1.11'), der(0x05)), digest: 'sha256' };
  if (key.asymmetricKeyType === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    if (curve === 'secp384r1') return { id: seq(oid('1.2.840.10045.4.3.3')), digest: 'sha384' };
    if (curve === 'secp521r1') return { id: seq(oid('1.2.840.10045.4.3.4')), digest: 'sha512' };
    return { id: seq(oid('1.2.840.10045.4.3.2')), digest: 'sha256' };
  }
  if (key.asymmetricKeyType === 'ed25519') return { id: seq(oid('1.3.101.112')), digest: '' };
  throw new Error(`unsupported key type ${key.asymmetricKeyType}`);
}

function signed(body: Buffer, key: crypto.KeyObject): Buffer {
  const alg = algorithmOf(key);
  const signature = crypto.sign(alg.digest || null, body, key);
  return seq(body, alg.id, bitString(signature));
}

function publicKeyInfo(key: crypto.KeyObject): Buffer {
  return crypto.createPublicKey(key).export({ type: 'spki', format: 'der' });
}

/** A PKCS#10 request for `names` (the first also as CN when `commonName`), DER. */
export function createCsr(key: crypto.KeyObject, names: string[], withCommonName = false): Buffer {
  const extensions = seq(extension('2.5.29.17', false, altNames(names)));
  const attributes = der(0xa0, seq(oid('1.2.840.113549.1.9.14'), set(extensions)));
  const info = seq(integer(Buffer.from([0])), commonName(withCommonName ? names[0] : undefined), publicKeyInfo(key), attributes);
  return signed(info, key);
}

export interface SelfSignedOptions {
  names: string[];
  notBefore?: Date;
  notAfter?: Date;
  /** RFC 8737: the SHA-256 of the key authorization, in a critical acmeIdentifier extension. */
  acmeIdentifier?: Buffer;
}

/** A self-signed certificate for `names`, PEM. */
export function createSelfSigned(key: crypto.KeyObject, opts: SelfSignedOptions): string {
  const now = Date.now();
  const notBefore = opts.notBefore ?? new Date(now - 60_000);
  const notAfter = opts.notAfter ?? new Date(now + 7 * 86_400_000);
  const serial = crypto.randomBytes(16);
  serial[0] &= 0x7f;
  const alg = algorithmOf(key);
  const exts = [extension('2.5.29.17', false, altNames(opts.names))];
  if (opts.acmeIdentifier) exts.push(extension('1.3.6.1.5.5.7.1.31', true, octets(opts.acmeIdentifier)));
  const name = commonName(opts.names[0]);
  const tbs = seq(
    der(0xa0, integer(Buffer.from([2]))), integer(serial), alg.id, name,
    seq(time(notBefore), time(notAfter)), name, publicKeyInfo(key), der(0xa3, seq(...exts)),
  );
  const cert = signed(tbs, key);
  return `-----BEGIN CERTIFICATE-----\n${cert.toString('base64').replace(/.{64}/g, '$&\n').replace(/\n?$/, '\n')}-----END CERTIFICATE-----\n`;
}

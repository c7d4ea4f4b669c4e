/**
 * What the configuration asks for (issuers and certificate orders, filled
 * by src/http/modules/acme/) and what is kept in an issuer's state_path,
 * as nginx-acme keeps it: `account.key`, and `<order>.crt` / `<order>.key`
 * per certificate, reused at start when the key matches the certificate —
 * so a restart while the CA is down keeps serving.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { RuntimeCertificate } from '../tls/certificate-registry.ts';
import { generateKey, keyPem } from './jws.ts';
import type { KeySpec } from './jws.ts';

export interface IssuerConf {
  name: string;
  uri: string;
  accountKey: KeySpec;
  challenge: 'http-01' | 'tls-alpn-01' | 'dns-01';
  /** dns-01: the command that publishes and removes the TXT records (a Gatehouse addition). */
  dnsHook?: string;
  contacts: string[];
  commonNameInCsr: boolean;
  eab?: { kid: string; key: Buffer };
  preferredChain?: string;
  profile?: { name: string; require: boolean };
  trustedCertificate?: string;
  verify: boolean;
  /** undefined: `state_path off` (kept in memory only). */
  statePath: string | undefined;
  acceptTos: boolean;
  /** The http block's `resolver`, for the ACME server's name. */
  resolve?: (host: string) => Promise<string[]>;
}

export interface OrderConf {
  issuer: IssuerConf;
  /** Issuers tried in turn when the one before fails (`fallback=`, a Gatehouse addition). */
  fallbacks: IssuerConf[];
  names: string[];
  key: KeySpec;
  /** File name and registry name: the first name and a hash of the names and key type. */
  id: string;
}

export function orderId(names: string[], key: KeySpec): string {
  const hash = crypto.createHash('sha256').update(JSON.stringify([names, key])).digest('hex').slice(0, 16);
  return `${names[0].replace(/^\*/, '_')}-${hash}`;
}

/** Whether `cert` (PEM chain) is a usable certificate for `names` with `keyPem`. */
export function certificateFits(cert: RuntimeCertificate, names: string[]): crypto.X509Certificate | undefined {
  try {
    const leaf = new crypto.X509Certificate(cert.certPem);
    if (!leaf.checkPrivateKey(crypto.createPrivateKey(cert.keyPem))) return undefined;
    const san = (leaf.subjectAltName ?? '').split(', ').map((s) => s.replace(/^(DNS|IP Address):/, '').toLowerCase());
    if (!names.every((n) => san.includes(n.toLowerCase()))) return undefined;
    return leaf;
  } catch {
    return undefined;
  }
}

/** The stored certificate of an order (from the first issuer's state_path that has one), if its key matches and it covers the names. */
export function storedCertificate(order: OrderConf): { cert: RuntimeCertificate; issuer: IssuerConf } | undefined {
  for (const issuer of [order.issuer, ...order.fallbacks]) {
    const dir = issuer.statePath;
    if (!dir) continue;
    try {
      const cert = { certPem: fs.readFileSync(path.join(dir, `${order.id}.crt`), 'latin1'), keyPem: fs.readFileSync(path.join(dir, `${order.id}.key`), 'latin1') };
      if (certificateFits(cert, order.names)) return { cert, issuer };
    } catch { /* not there */ }
  }
  return undefined;
}

function ensureDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/** Writes a file whole or not at all (a crash never leaves a certificate beside the wrong key). */
function writeAtomic(file: string, data: string, mode: number): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, data, { mode });
  fs.renameSync(tmp, file);
}

export function storeCertificate(order: OrderConf, issuer: IssuerConf, cert: RuntimeCertificate): void {
  const dir = issuer.statePath;
  if (!dir) return;
  ensureDir(dir);
  writeAtomic(path.join(dir, `${order.id}.key`), cert.keyPem, 0o600);
  writeAtomic(path.join(dir, `${order.id}.crt`), cert.certPem, 0o644);
}

/** Account keys made in this process, for `state_path off` (kept across reloads, lost at exit). */
const generated = new Map<string, crypto.KeyObject>();

/** The account key: the configured file, the one in state_path, or a new one (stored there). */
export function accountKey(issuer: IssuerConf): crypto.KeyObject {
  const spec = issuer.accountKey;
  if (spec.type === 'file') return crypto.createPrivateKey(fs.readFileSync(spec.path, 'latin1'));
  const memoKey = `${issuer.name}\0${issuer.uri}\0${JSON.stringify(spec)}`;
  const dir = issuer.statePath;
  if (dir) {
    const file = path.join(dir, 'account.key');
    try {
      const key = crypto.createPrivateKey(fs.readFileSync(file, 'latin1'));
      if (keyMatches(key, spec)) return key;
    } catch { /* none yet */ }
    const key = generateKey(spec);
    ensureDir(dir);
    writeAtomic(file, keyPem(key), 0o600);
    return key;
  }
  let key = generated.get(memoKey);
  if (!key) generated.set(memoKey, (key = generateKey(spec)));
  return key;
}

function keyMatches(key: crypto.KeyObject, spec: KeySpec): boolean {
  if (spec.type === 'rsa') return key.asymmetricKeyType === 'rsa' && key.asymmetricKeyDetails?.modulusLength === spec.bits;
  if (spec.type === 'ecdsa') return key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === ({ 256: 'prime256v1', 384: 'secp384r1', 521: 'secp521r1' } as const)[spec.bits];
  return true;
}

/**
 * Loading certificates and keys as nginx does (ngx_ssl_certificate): PEM
 * files (or `data:` values) holding the certificate and its chain, keys
 * possibly encrypted and opened with `ssl_password_file`'s passwords, in
 * order. Errors carry nginx's wording. Certificates named by variables are
 * loaded at handshake time through a small cache (`ssl_certificate_cache`).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { diskFiles } from './load-files.ts';
import type { TlsFiles } from './load-files.ts';

/** A certificate chain (leaf first) and its private key, ready for a TLS context. */
export interface CertKeyPair {
  certPath: string;
  keyPath: string;
  /** PEM of the leaf and its chain, as in the file. */
  certPem: string;
  /** Unencrypted private key (PKCS#8 PEM). */
  keyPem: string;
  /** The leaf, parsed. */
  leaf: crypto.X509Certificate;
  /** The chain certificates after the leaf (intermediates), parsed. */
  chain: crypto.X509Certificate[];
}

export class CertLoadError extends Error {}

const PEM_CERT = /-----BEGIN (?:TRUSTED )?CERTIFICATE-----[\s\S]+?-----END (?:TRUSTED )?CERTIFICATE-----/g;

function fopenError(path: string, what: string, err: unknown): CertLoadError {
  const code = (err as NodeJS.ErrnoException).code;
  const reason = code === 'EACCES' ? 'Permission denied' : 'No such file or directory';
  const errno = code === 'EACCES' ? '80000000D' : '80000002';
  return new CertLoadError(`cannot load ${what} "${path}": BIO_new_file() failed (SSL: error:${errno.slice(-8)}:system library::${reason}:calling fopen(${path}, r) error:10000080:BIO routines::no such file)`);
}

/** Reads a PEM file (through the configuration load's `files`) or a `data:` value. */
export function readPem(path: string, what: string, files: TlsFiles = diskFiles): string {
  if (path.startsWith('data:')) return path.slice(5);
  try {
    return files.text(path);
  } catch (err) {
    throw fopenError(path, what, err);
  }
}

/** Every certificate in a PEM text. */
export function pemCertificates(pem: string): string[] {
  return pem.match(PEM_CERT) ?? [];
}

/** The password file's lines (nginx's ssl_password_file: one password per line). */
export function readPasswords(path: string, known?: string): string[] {
  let text: string;
  try {
    text = known ?? fs.readFileSync(path, 'latin1');
  } catch (err) {
    throw new CertLoadError(`open() "${path}" failed (${(err as NodeJS.ErrnoException).code === 'EACCES' ? '13: Permission denied' : '2: No such file or directory'})`);
  }
  const list = text.split(/\r?\n/);
  if (list.length && list[list.length - 1] === '') list.pop();
  if (list.length === 0) throw new CertLoadError(`empty file "${path}"`);
  return list;
}

function openKey(pem: string, keyPath: string, passwords: string[] | undefined): string {
  const attempts = passwords && passwords.length ? passwords : [undefined];
  let last: unknown;
  for (const passphrase of attempts) {
    try {
      const key = crypto.createPrivateKey(passphrase === undefined ? { key: pem, format: 'pem' } : { key: pem, format: 'pem', passphrase });
      return key.export({ type: 'pkcs8', format: 'pem' }) as string;
    } catch (err) {
      last = err;
    }
  }
  const detail = String((last as Error)?.message ?? last);
  const ssl = /bad decrypt|passphrase/i.test(detail)
    ? 'error:1C800064:Provider routines::bad decrypt error:04800065:PEM routines::bad decrypt'
    : 'error:1E08010C:DECODER routines::unsupported';
  throw new CertLoadError(`cannot load certificate key "${keyPath}": PEM_read_bio_PrivateKey() failed (SSL: ${ssl})`);
}

/** Loads one `ssl_certificate` / `ssl_certificate_key` pair; throws CertLoadError with nginx's message. */
export function loadCertKeyPair(certPath: string, keyPath: string, passwords: string[] | undefined, files: TlsFiles = diskFiles): CertKeyPair {
  const certPem = readPem(certPath, 'certificate', files);
  const certs = pemCertificates(certPem);
  if (certs.length === 0) {
    throw new CertLoadError(`cannot load certificate "${certPath}": PEM_read_bio_X509_AUX() failed (SSL: error:0480006C:PEM routines::no start line:Expecting: TRUSTED CERTIFICATE)`);
  }
  let parsed: crypto.X509Certificate[];
  try {
    parsed = certs.map((c) => new crypto.X509Certificate(c));
  } catch {
    throw new CertLoadError(`cannot load certificate "${certPath}": PEM_read_bio_X509_AUX() failed (SSL: error:0680007B:asn1 encoding routines::header too long)`);
  }
  const keyPem = openKey(readPem(keyPath, 'certificate key', files), keyPath, passwords);
  if (!parsed[0].checkPrivateKey(crypto.createPrivateKey(keyPem))) {
    throw new CertLoadError(`SSL_CTX_use_PrivateKey("${keyPath}") failed (SSL: error:05800074:x509 certificate routines::key values mismatch)`);
  }
  return { certPath, keyPath, certPem: certs.join('\n') + '\n', keyPem, leaf: parsed[0], chain: parsed.slice(1) };
}

/** Loaded pairs by their paths, for certificates named by variables. */
export class CertificateCache {
  private readonly entries = new Map<string, { value: CertKeyPair[]; loaded: number; used: number }>();
  private readonly max: number;
  private readonly validMs: number;
  private readonly inactiveMs: number;

  constructor(max: number, validMs: number, inactiveMs: number) {
    this.max = max;
    this.validMs = validMs;
    this.inactiveMs = inactiveMs;
  }

  get(key: string): CertKeyPair[] | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    const now = Date.now();
    if (now - e.loaded > this.validMs || now - e.used > this.inactiveMs) {
      this.entries.delete(key);
      return undefined;
    }
    e.used = now;
    return e.value;
  }

  set(key: string, value: CertKeyPair[]): void {
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value as string);
    const now = Date.now();
    this.entries.set(key, { value, loaded: now, used: now });
  }
}

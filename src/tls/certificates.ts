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

/** A certificate file: the leaf and its chain. */
interface CertFile {
  path: string;
  pem: string;
  parsed: crypto.X509Certificate[];
}

/** A key file, opened (PKCS#8 PEM), and whether a password opened it. */
interface KeyFile {
  path: string;
  pem: string;
  encrypted: boolean;
}

function loadCertFile(certPath: string, files: TlsFiles): CertFile {
  const certPem = readPem(certPath, 'certificate', files);
  const certs = pemCertificates(certPem);
  if (certs.length === 0) {
    throw new CertLoadError(`cannot load certificate "${certPath}": PEM_read_bio_X509_AUX() failed (SSL: error:0480006C:PEM routines::no start line:Expecting: TRUSTED CERTIFICATE)`);
  }
  try {
    return { path: certPath, pem: certs.join('\n') + '\n', parsed: certs.map((c) => new crypto.X509Certificate(c)) };
  } catch {
    throw new CertLoadError(`cannot load certificate "${certPath}": PEM_read_bio_X509_AUX() failed (SSL: error:0680007B:asn1 encoding routines::header too long)`);
  }
}

function loadKeyFile(keyPath: string, passwords: string[] | undefined, files: TlsFiles): KeyFile {
  const text = readPem(keyPath, 'certificate key', files);
  return { path: keyPath, pem: openKey(text, keyPath, passwords), encrypted: text.includes('ENCRYPTED') };
}

function combine(cert: CertFile, key: KeyFile): CertKeyPair {
  if (!cert.parsed[0].checkPrivateKey(crypto.createPrivateKey(key.pem))) {
    throw new CertLoadError(`SSL_CTX_use_PrivateKey("${key.path}") failed (SSL: error:05800074:x509 certificate routines::key values mismatch)`);
  }
  return { certPath: cert.path, keyPath: key.path, certPem: cert.pem, keyPem: key.pem, leaf: cert.parsed[0], chain: cert.parsed.slice(1) };
}

/** Loads one `ssl_certificate` / `ssl_certificate_key` pair; throws CertLoadError with nginx's message. */
export function loadCertKeyPair(certPath: string, keyPath: string, passwords: string[] | undefined, files: TlsFiles = diskFiles): CertKeyPair {
  const cert = loadCertFile(certPath, files);
  return combine(cert, loadKeyFile(keyPath, passwords, files));
}

/**
 * `ssl_certificate_cache` for certificates named by variables, as nginx's
 * ngx_ssl_cache: certificate files and key files are entries of their own
 * (a pair takes two of `max`), the least recently used goes first, an entry
 * is read again once `valid` has passed or after `inactive` unused; keys
 * opened with a password are not kept.
 */
export class CertificateCache {
  private readonly entries = new Map<string, { value: CertFile | KeyFile; loaded: number; used: number }>();
  /** The pair made of a certificate entry and a key entry, so that its TLS context is found again. */
  private readonly pairs = new WeakMap<CertFile, WeakMap<KeyFile, CertKeyPair>>();
  private readonly max: number;
  private readonly validMs: number;
  private readonly inactiveMs: number;

  constructor(max: number, validMs: number, inactiveMs: number) {
    this.max = max;
    this.validMs = validMs;
    this.inactiveMs = inactiveMs;
  }

  /** The pair of these files, from the cache or loaded into it; throws CertLoadError. */
  pair(certPath: string, keyPath: string, passwords: string[] | undefined): CertKeyPair {
    const cert = this.fetch(`c:${certPath}`, () => loadCertFile(certPath, diskFiles)) as CertFile;
    const key = this.fetch(`k:${keyPath}`, () => loadKeyFile(keyPath, passwords, diskFiles)) as KeyFile;
    let byKey = this.pairs.get(cert);
    if (!byKey) this.pairs.set(cert, (byKey = new WeakMap()));
    let pair = byKey.get(key);
    if (!pair) byKey.set(key, (pair = combine(cert, key)));
    return pair;
  }

  private fetch(name: string, load: () => CertFile | KeyFile): CertFile | KeyFile {
    const now = Date.now();
    const e = this.entries.get(name);
    if (e) {
      this.entries.delete(name);
      if (now - e.loaded <= this.validMs && now - e.used <= this.inactiveMs) {
        e.used = now;
        this.entries.set(name, e);
        return e.value;
      }
    }
    const value = load();
    if ('encrypted' in value && value.encrypted) return value;
    while (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(name, { value, loaded: now, used: now });
    return value;
  }
}

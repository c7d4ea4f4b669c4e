/**
 * The client certificate and key an HTTPS upstream connection presents
 * (proxy_ssl_certificate, proxy_ssl_certificate_key), loaded as nginx
 * loads them: a path without variables once (nginx: at configuration
 * time), a path with variables for every connection, or through
 * `proxy_ssl_certificate_cache max=N [inactive=time] [valid=time]`
 * (ngx_ssl_cache): entries reloaded once `valid` has passed, the least
 * recently used dropped beyond `max`, unused ones after `inactive`; an
 * encrypted key is never cached. A file that cannot be loaded is a 500.
 */
import crypto from 'node:crypto';
import { parseTime } from '../conf/values.ts';
import { diskFiles } from './load-files.ts';
import type { TlsFiles } from './load-files.ts';

export interface CertCacheConf {
  max: number;
  /** Seconds, as nginx keeps them. */
  valid: number;
  inactive: number;
}

/** `off | max=N [inactive=time] [valid=time]`: the settings, false for off, or nginx's error. */
export function parseCertCache(args: string[]): CertCacheConf | false | string {
  let max = 0;
  let inactive = 10;
  let valid = 60;
  let off = false;
  for (const a of args) {
    if (a.startsWith('max=') && /^\d+$/.test(a.slice(4)) && Number(a.slice(4)) > 0) max = Number(a.slice(4));
    else if (a.startsWith('inactive=') && !Number.isNaN(parseTime(a.slice(9), true))) inactive = parseTime(a.slice(9), true);
    else if (a.startsWith('valid=') && !Number.isNaN(parseTime(a.slice(6), true))) valid = parseTime(a.slice(6), true);
    else if (a === 'off') off = true;
    else return `invalid parameter "${a}"`;
  }
  if (off) return false;
  if (max === 0) return '"proxy_ssl_certificate_cache" must have the "max" parameter';
  return { max, valid, inactive };
}

/** A loaded key: its PEM and the password that opens it. */
export interface LoadedKey {
  pem: Buffer;
  passphrase: string | undefined;
}

interface Entry {
  value: Buffer | LoadedKey;
  created: number;
  accessed: number;
}

const nowSec = (): number => Math.floor(Date.now() / 1000);

/** An error as nginx logs it: `cannot load certificate "path": reason`. */
function loadError(what: string, path: string, err: unknown): Error {
  return new Error(`cannot load ${what} "${path}": ${(err as Error).message}`);
}

/** Reads and checks a certificate file (throws with the reason). */
export function loadCertificate(path: string, files: TlsFiles = diskFiles): Buffer {
  try {
    const pem = files.bytes(path);
    new crypto.X509Certificate(pem);
    return pem;
  } catch (err) {
    throw loadError('certificate', path, err);
  }
}

/**
 * Reads a key, trying each password of proxy_ssl_password_file on an
 * encrypted one (throws when none opens it). `encrypted` tells the cache
 * to leave it out.
 */
export function loadKey(path: string, passwords: string[] | undefined, files: TlsFiles = diskFiles): LoadedKey & { encrypted: boolean } {
  let pem: Buffer;
  try {
    pem = files.bytes(path);
  } catch (err) {
    throw loadError('certificate key', path, err);
  }
  const encrypted = pem.includes('ENCRYPTED');
  if (!encrypted) {
    try {
      crypto.createPrivateKey(pem);
    } catch (err) {
      throw loadError('certificate key', path, err);
    }
    return { pem, passphrase: undefined, encrypted };
  }
  let last: unknown = new Error('no password to open the key');
  for (const passphrase of passwords ?? []) {
    try {
      crypto.createPrivateKey({ key: pem, passphrase });
      return { pem, passphrase, encrypted };
    } catch (err) {
      last = err;
    }
  }
  throw loadError('certificate key', path, last);
}

/** One `proxy_ssl_certificate_cache` (per worker): entries by kind and path, least recently used first. */
export class CertCache {
  private readonly conf: CertCacheConf;
  private readonly entries = new Map<string, Entry>();

  constructor(conf: CertCacheConf) {
    this.conf = conf;
  }

  /**
   * The key first, then the certificate, as nginx fetches them: a key that
   * had to be decrypted keeps both out of the cache.
   */
  pair(certPath: string, keyPath: string, passwords: string[] | undefined): { cert: Buffer; key: LoadedKey } {
    let encrypted = false;
    const key = this.fetch('k:' + keyPath, () => {
      const k = loadKey(keyPath, passwords);
      encrypted = k.encrypted;
      return { value: { pem: k.pem, passphrase: k.passphrase }, cacheable: !k.encrypted };
    }) as LoadedKey;
    const cert = this.fetch('c:' + certPath, () => ({ value: loadCertificate(certPath), cacheable: !encrypted })) as Buffer;
    return { cert, key };
  }

  /** nginx's ngx_ssl_cache_connection_fetch. */
  private fetch(id: string, load: () => { value: Buffer | LoadedKey; cacheable: boolean }): Buffer | LoadedKey {
    const now = nowSec();
    this.expire(1, now);
    const e = this.entries.get(id);
    if (e) {
      this.entries.delete(id);
      if (now - e.created > this.conf.valid) {
        // reloaded once valid has passed; an error or an encrypted key drops the entry
        const fresh = load();
        if (!fresh.cacheable) return fresh.value;
        e.value = fresh.value;
        e.created = now;
      }
      e.accessed = now;
      this.entries.set(id, e);
      return e.value;
    }
    const fresh = load();
    if (!fresh.cacheable) return fresh.value;
    if (this.entries.size >= this.conf.max) this.expire(0, now);
    this.entries.set(id, { value: fresh.value, created: now, accessed: now });
    return fresh.value;
  }

  /** ngx_ssl_cache_expire: with n = 0 the least recently used goes anyway; then up to two unused for `inactive`. */
  private expire(n: number, now: number): void {
    for (const [id, e] of this.entries) {
      if (n >= 3) return;
      if (n++ !== 0 && now - e.accessed <= this.conf.inactive) return;
      this.entries.delete(id);
    }
  }
}

/**
 * APISIX's data encryption (apisix/core/data_encryption.lua): fields a
 * plugin declares secret (`encrypt_fields`: basic-auth `password`, key-auth
 * `key`) and SSL private keys are stored AES-CBC encrypted with the first
 * keyring entry (the key doubling as IV: 16 bytes AES-128, 32 AES-256),
 * base64; every entry is tried to decrypt, so a keyring can be rotated.
 */
import crypto from 'node:crypto';

/** APISIX's default keyring (apisix/cli/config.lua). */
export const DEFAULT_KEYRING = ['qeddd145sfvddff3', 'edd1c9f0985e76a2'];

function cipherOf(key: string): string {
  return Buffer.byteLength(key) === 32 ? 'aes-256-cbc' : 'aes-128-cbc';
}

export class Keyring {
  private readonly keys: string[];

  constructor(keys: string[]) {
    this.keys = keys;
  }

  encrypt(plain: string): string {
    const key = Buffer.from(this.keys[0]);
    const c = crypto.createCipheriv(cipherOf(this.keys[0]), key, key);
    return Buffer.concat([c.update(plain, 'utf8'), c.final()]).toString('base64');
  }

  /** The plain text, or undefined when no key of the ring opens it (the value is then left as stored). */
  decrypt(stored: string): string | undefined {
    const data = Buffer.from(stored, 'base64');
    for (const k of this.keys) {
      const key = Buffer.from(k);
      try {
        const d = crypto.createDecipheriv(cipherOf(k), key, key);
        return Buffer.concat([d.update(data), d.final()]).toString('utf8');
      } catch { /* the next key */ }
    }
    return undefined;
  }
}

/** Applies `fn` to the string (or strings of an array or map) at a dotted path (`a.b`), through arrays on the way. */
export function mapField(conf: Record<string, unknown>, dotted: string, fn: (v: string) => string | undefined): void {
  const dot = dotted.indexOf('.');
  const apply = (v: string): string => fn(v) ?? v;
  if (dot < 0) {
    const v = conf[dotted];
    if (typeof v === 'string') conf[dotted] = apply(v);
    else if (Array.isArray(v)) conf[dotted] = v.map((x) => (typeof x === 'string' ? apply(x) : x));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) if (typeof x === 'string') (v as Record<string, unknown>)[k] = apply(x);
    return;
  }
  const next = conf[dotted.slice(0, dot)];
  const rest = dotted.slice(dot + 1);
  if (Array.isArray(next)) for (const item of next) { if (item && typeof item === 'object') mapField(item as Record<string, unknown>, rest, fn); }
  else if (next && typeof next === 'object') mapField(next as Record<string, unknown>, rest, fn);
}

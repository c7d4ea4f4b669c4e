/**
 * Session ticket keys, as nginx chooses them:
 *  - `ssl_session_ticket_key` files (48 or 80 bytes): the first key
 *    encrypts, every key decrypts; tickets decrypted with another key (or
 *    in TLS 1.3) are renewed. The same files give the same keys in every
 *    worker and after reloads and restarts.
 *  - with `ssl_session_cache shared:…` and no files: three keys kept in the
 *    shared zone and rotated every `ssl_session_timeout` (nginx ≥ 1.23.2),
 *    the same in every worker.
 *  - otherwise: one random key per server block, the same in every worker
 *    (derived from a process-wide random seed zone).
 *
 * Node's TLS contexts expose OpenSSL's ticket key callback to JavaScript
 * (`context.enableTicketKeyCallback()` + `onticketkeycallback`), with
 * HMAC-SHA256 and AES-128-CBC. A 48-byte nginx key is exactly that (the
 * sessions inside still do not move between nginx and Gatehouse: their
 * session id contexts differ, see docs/tls.md); an 80-byte key (nginx:
 * 32-byte HMAC key, AES-256-CBC) keeps its HMAC key and uses the first 16
 * bytes of its AES key with AES-128.
 */
import crypto from 'node:crypto';
import type { SecureContext } from 'node:tls';
import { ConfError } from '../conf/errors.ts';
import { sysErrorText } from '../conf/errors.ts';
import { sharedZone } from '../core/shared.ts';
import type { SharedSessionCache } from './session-cache.ts';
import { TICKET_KEY_BYTES, TICKET_KEYS_OFFSET } from './session-cache.ts';
import { diskFiles } from './load-files.ts';
import type { TlsFiles } from './load-files.ts';

export interface TicketKey {
  name: Buffer;
  hmac: Buffer;
  /** 16 bytes (AES-128-CBC). */
  aes: Buffer;
}

export interface TicketKeySource {
  /** The key new tickets are encrypted with. */
  encryptKey(): TicketKey;
  /** The key named `name` and whether a ticket under it should be renewed. */
  decryptKey(name: Buffer): { key: TicketKey; renew: boolean } | undefined;
}

/** Splits nginx's key file formats: 48 = name|aes|hmac, 80 = name|hmac(32)|aes(32). */
export function keyFromNginxBytes(buf: Buffer): TicketKey {
  if (buf.length === 48) {
    return { name: buf.subarray(0, 16), aes: buf.subarray(16, 32), hmac: buf.subarray(32, 48) };
  }
  return { name: buf.subarray(0, 16), hmac: buf.subarray(16, 48), aes: buf.subarray(48, 64) };
}

/** Keys from `ssl_session_ticket_key` files; errors are nginx's. */
export function fileTicketKeys(paths: string[], files: TlsFiles = diskFiles): TicketKeySource {
  const keys = paths.map((p) => {
    let data: Buffer;
    try {
      data = files.bytes(p);
    } catch (err) {
      throw new ConfError(`open() "${p}" failed ${sysErrorText(err)}`);
    }
    if (data.length !== 48 && data.length !== 80) throw new ConfError(`"${p}" must be 48 or 80 bytes`);
    return keyFromNginxBytes(Buffer.from(data));
  });
  return {
    encryptKey: () => keys[0],
    decryptKey(name) {
      const i = keys.findIndex((k) => k.name.equals(name));
      return i < 0 ? undefined : { key: keys[i], renew: i !== 0 };
    },
  };
}

/** One random key per `identity`, equal in every worker: derived from a seed the master made. */
export function derivedTicketKeys(identity: string): TicketKeySource {
  const seed = new Uint8Array(sharedZone('ssl_ticket_seed', 32));
  const i32 = new Int32Array(seed.buffer, 0, 8);
  // the first thread to look fills the seed; a non-zero word marks it filled
  if (Atomics.load(i32, 7) === 0) {
    const rnd = crypto.randomBytes(32);
    if (rnd.readInt32LE(28) === 0) rnd.writeInt32LE(1, 28);
    if (Atomics.compareExchange(i32, 7, 0, rnd.readInt32LE(28)) === 0) seed.set(rnd.subarray(0, 28));
  }
  const material = crypto.createHmac('sha256', seed).update(identity).digest();
  const more = crypto.createHmac('sha256', seed).update(identity + '/aes').digest();
  const key: TicketKey = { name: material.subarray(0, 16), hmac: material.subarray(16, 32), aes: more.subarray(0, 16) };
  return {
    encryptKey: () => key,
    decryptKey: (name) => (key.name.equals(name) ? { key, renew: false } : undefined),
  };
}

/**
 * nginx's rotating keys in a shared session cache zone (ngx_ssl_rotate_ticket_keys):
 * key 0 encrypts and lives until `timeout` after its last use, key 1 is the
 * previous one (still decrypts), key 2 the next one.
 */
export function sharedTicketKeys(cache: SharedSessionCache, timeoutSec: number): TicketKeySource {
  const view = cache.dataView;
  const u8 = cache.view8;
  const at = (i: number) => TICKET_KEYS_OFFSET + i * TICKET_KEY_BYTES;
  const read = (i: number): TicketKey & { expire: number } => {
    const o = at(i);
    return {
      expire: view.getFloat64(o, true),
      name: Buffer.from(u8.subarray(o + 16, o + 32)),
      hmac: Buffer.from(u8.subarray(o + 32, o + 64)),
      aes: Buffer.from(u8.subarray(o + 64, o + 80)),
    };
  };
  const copy = (from: number, to: number) => u8.copyWithin(at(to), at(from), at(from) + TICKET_KEY_BYTES);
  const fresh = (i: number, expire: number) => {
    u8.set(crypto.randomBytes(80), at(i) + 16);
    view.setFloat64(at(i), expire, true);
  };
  let local: Array<TicketKey & { expire: number }> = [];

  const rotate = (): void => {
    const now = Date.now() / 1000;
    const expire = now + timeoutSec;
    if (local.length && local[0].expire >= expire - 1 && local[1].expire >= now) return;
    local = cache.locked(() => {
      if (view.getFloat64(at(0), true) === 0) {
        fresh(0, expire);
        copy(0, 2);
      }
      if (view.getFloat64(at(1), true) < now) {
        copy(0, 1);
        copy(2, 0);
        fresh(2, 0);
      }
      if (expire > view.getFloat64(at(0), true)) view.setFloat64(at(0), expire, true);
      return [read(0), read(1)];
    });
  };

  return {
    encryptKey() {
      rotate();
      return local[0];
    },
    decryptKey(name) {
      rotate();
      const i = local.findIndex((k) => k.name.equals(name));
      return i < 0 ? undefined : { key: local[i], renew: true };
    },
  };
}

interface NativeContext {
  enableTicketKeyCallback(): void;
  onticketkeycallback: (name: Buffer, iv: Buffer, enc: boolean) => unknown[];
}

const UNKNOWN_KEY = Buffer.alloc(16);

/** Makes `ctx` issue and accept tickets with `source`'s keys (TLS 1.3 tickets are always renewed, as nginx does). */
export function installTicketKeys(ctx: SecureContext, source: TicketKeySource): void {
  const native = (ctx as unknown as { context: NativeContext }).context;
  native.enableTicketKeyCallback();
  native.onticketkeycallback = (name, _iv, enc) => {
    if (enc) {
      const k = source.encryptKey();
      return [1, k.hmac, k.aes, k.name, crypto.randomBytes(16)];
    }
    const found = source.decryptKey(name);
    // Node reads the keys even for "unknown ticket" (0): give placeholders
    if (!found) return [0, UNKNOWN_KEY, UNKNOWN_KEY];
    return [found.renew ? 2 : 1, found.key.hmac, found.key.aes];
  };
}

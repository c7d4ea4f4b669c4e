/**
 * Password hashes of htpasswd files (nginx's ngx_crypt plus what glibc's
 * crypt(3) adds): `$apr1$` and `$1$` (MD5-crypt), `$5$`/`$6$` (SHA-crypt),
 * `{PLAIN}`, `{SHA}`, `{SSHA}`, traditional DES crypt (through
 * unix-crypt-td-js) and bcrypt `$2a$`/`$2b$`/`$2y$` (through bcryptjs, as
 * `htpasswd -B` writes; Debian's nginx gets it from libxcrypt).
 * `verifyPassword` says whether a password matches.
 */
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import bcrypt from 'bcryptjs';

const requireCjs = createRequire(import.meta.url);
const desCrypt = requireCjs('unix-crypt-td-js') as (pw: string, salt: string) => string;

const ITOA64 = './0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function to64(v: number, n: number): string {
  let s = '';
  while (n-- > 0) {
    s += ITOA64[v & 0x3f];
    v >>>= 6;
  }
  return s;
}

/** Encodes digest bytes in crypt's base64 order: triples of indexes, most significant first. */
function encodeTriples(d: Buffer, order: number[]): string {
  let s = '';
  for (let i = 0; i + 2 < order.length; i += 3) {
    s += to64((d[order[i]] << 16) | (d[order[i + 1]] << 8) | d[order[i + 2]], 4);
  }
  return s;
}

/** MD5-crypt (Poul-Henning Kamp's), with `$1$` or Apache's `$apr1$` magic. */
export function md5Crypt(pw: Buffer, setting: string, magic: '$1$' | '$apr1$'): string {
  let salt = setting.slice(magic.length, magic.length + 8);
  const dollar = salt.indexOf('$');
  if (dollar >= 0) salt = salt.slice(0, dollar);
  const saltBuf = Buffer.from(salt, 'latin1');
  const alt = crypto.createHash('md5').update(pw).update(saltBuf).update(pw).digest();
  const ctx = crypto.createHash('md5').update(pw).update(magic).update(saltBuf);
  for (let left = pw.length; left > 0; left -= 16) ctx.update(alt.subarray(0, Math.min(left, 16)));
  for (let i = pw.length; i; i >>= 1) ctx.update(i & 1 ? Buffer.from([0]) : pw.subarray(0, 1));
  let final = ctx.digest();
  for (let i = 0; i < 1000; i++) {
    const c = crypto.createHash('md5');
    c.update(i & 1 ? pw : final);
    if (i % 3) c.update(saltBuf);
    if (i % 7) c.update(pw);
    c.update(i & 1 ? final : pw);
    final = c.digest();
  }
  const out = encodeTriples(final, [0, 6, 12, 1, 7, 13, 2, 8, 14, 3, 9, 15, 4, 10, 5]) + to64(final[11], 2);
  return `${magic}${salt}$${out}`;
}

const SHA256_ORDER = [0, 10, 20, 21, 1, 11, 12, 22, 2, 3, 13, 23, 24, 4, 14, 15, 25, 5, 6, 16, 26, 27, 7, 17, 18, 28, 8, 9, 19, 29];
const SHA512_ORDER = [
  0, 21, 42, 22, 43, 1, 44, 2, 23, 3, 24, 45, 25, 46, 4, 47, 5, 26, 6, 27, 48, 28, 49, 7, 50, 8, 29, 9, 30, 51, 31, 52, 10,
  53, 11, 32, 12, 33, 54, 34, 55, 13, 56, 14, 35, 15, 36, 57, 37, 58, 16, 59, 17, 38, 18, 39, 60, 40, 61, 19, 62, 20, 41,
];

/** Repeats `block` to `len` bytes. */
function stretch(block: Buffer, len: number): Buffer {
  const out = Buffer.alloc(len);
  for (let i = 0; i < len; i += block.length) block.copy(out, i, 0, Math.min(block.length, len - i));
  return out;
}

/** SHA-crypt (Ulrich Drepper's `$5$` / `$6$`, as glibc), with optional `rounds=N$`. */
export function shaCrypt(pw: Buffer, setting: string, magic: '$5$' | '$6$'): string {
  const algo = magic === '$5$' ? 'sha256' : 'sha512';
  let rest = setting.slice(3);
  let rounds = 5000;
  let custom = false;
  const m = /^rounds=(\d+)\$/.exec(rest);
  if (m) {
    rounds = Math.min(Math.max(Number(m[1]), 1000), 999_999_999);
    custom = true;
    rest = rest.slice(m[0].length);
  }
  let salt = rest.slice(0, 16);
  const dollar = salt.indexOf('$');
  if (dollar >= 0) salt = salt.slice(0, dollar);
  const s = Buffer.from(salt, 'latin1');
  const H = () => crypto.createHash(algo);
  const b = H().update(pw).update(s).update(pw).digest();
  const a = H().update(pw).update(s).update(stretch(b, pw.length));
  for (let n = pw.length; n > 0; n >>= 1) a.update(n & 1 ? b : pw);
  let c = a.digest();
  const dp = H();
  for (let i = 0; i < pw.length; i++) dp.update(pw);
  const p = stretch(dp.digest(), pw.length);
  const ds = H();
  for (let i = 0; i < 16 + c[0]; i++) ds.update(s);
  const sp = stretch(ds.digest(), s.length);
  for (let i = 0; i < rounds; i++) {
    const h = H();
    h.update(i & 1 ? p : c);
    if (i % 3) h.update(sp);
    if (i % 7) h.update(p);
    h.update(i & 1 ? c : p);
    c = h.digest();
  }
  const out = algo === 'sha256'
    ? encodeTriples(c, SHA256_ORDER) + to64((c[31] << 8) | c[30], 3)
    : encodeTriples(c, SHA512_ORDER) + to64(c[63], 2);
  return `${magic}${custom ? `rounds=${rounds}$` : ''}${salt}$${out}`;
}

const DES_SALT = /^[./0-9A-Za-z]{2}/;

/**
 * The hash of `password` with the settings of `stored`, as ngx_crypt and
 * crypt(3) compute it; undefined for a scheme we cannot compute (libc's
 * crypt would fail or return a failure token, which never matches).
 */
export function cryptPassword(password: Buffer, stored: string): string | undefined {
  if (stored.startsWith('$apr1$')) return md5Crypt(password, stored, '$apr1$');
  if (stored.startsWith('{PLAIN}')) return '{PLAIN}' + password.toString('latin1');
  if (stored.startsWith('{SSHA}')) {
    let decoded = Buffer.from(stored.slice(6), 'base64');
    if (decoded.length < 20 || !/^[A-Za-z0-9+/]*={0,2}$/.test(stored.slice(6))) decoded = Buffer.alloc(20);
    const digest = crypto.createHash('sha1').update(password).update(decoded.subarray(20)).digest();
    return '{SSHA}' + Buffer.concat([digest, decoded.subarray(20)]).toString('base64');
  }
  if (stored.startsWith('{SHA}')) return '{SHA}' + crypto.createHash('sha1').update(password).digest('base64');
  if (stored.startsWith('$1$')) return md5Crypt(password, stored, '$1$');
  if (stored.startsWith('$5$')) return shaCrypt(password, stored, '$5$');
  if (stored.startsWith('$6$')) return shaCrypt(password, stored, '$6$');
  if (stored[0] !== '$' && stored[0] !== '_' && DES_SALT.test(stored)) {
    return desCrypt(password.toString('latin1'), stored.slice(0, 2));
  }
  return undefined;
}

const BCRYPT = /^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$/;

/**
 * Whether `password` matches the stored hash (compared in constant time).
 * bcrypt runs asynchronously, in slices, so a costly hash does not stall
 * the worker's other connections.
 */
export async function verifyPassword(password: Buffer, stored: string): Promise<boolean> {
  if (BCRYPT.test(stored)) {
    // bcrypt reads at most 72 bytes of the password; $2y$ is $2b$ under another name
    return bcrypt.compare(password.toString('latin1'), stored.replace(/^\$2y\$/, '$2b$'));
  }
  const computed = cryptPassword(password, stored);
  if (computed === undefined) return false;
  const a = Buffer.from(computed, 'latin1');
  const b = Buffer.from(stored, 'latin1');
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

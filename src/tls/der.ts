/**
 * A minimal DER reader for the few structures read here directly: names in
 * certificates (for nginx's DN format) and the session id inside an
 * SSL_SESSION (OCSP and CRL structures go through pkijs), and the writer of
 * one element that the OCSP request and the X.509 builder lay out with.
 */

function derLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** One DER element: tag, length, content. */
export function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}

export interface Der {
  /** The full tag byte (class, constructed bit, number). */
  tag: number;
  /** Content bytes. */
  value: Buffer;
  /** The whole element, header included. */
  raw: Buffer;
}

/** Reads the element at `pos`; returns it and the position after it. */
export function readDer(buf: Buffer, pos = 0): [Der, number] {
  if (pos + 2 > buf.length) throw new RangeError('DER: truncated');
  const tag = buf[pos];
  let len = buf[pos + 1];
  let off = pos + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || off + n > buf.length) throw new RangeError('DER: bad length');
    len = buf.readUIntBE(off, n);
    off += n;
  }
  if (off + len > buf.length) throw new RangeError('DER: truncated');
  return [{ tag, value: buf.subarray(off, off + len), raw: buf.subarray(pos, off + len) }, off + len];
}

/** The children of a constructed element. */
export function derChildren(el: Der): Der[] {
  const out: Der[] = [];
  let pos = 0;
  while (pos < el.value.length) {
    const [child, next] = readDer(el.value, pos);
    out.push(child);
    pos = next;
  }
  return out;
}

/** Dotted form of an OBJECT IDENTIFIER's content. */
export function oidText(value: Buffer): string {
  const parts: number[] = [];
  let n = 0;
  for (let i = 0; i < value.length; i++) {
    n = n * 128 + (value[i] & 0x7f);
    if (!(value[i] & 0x80)) {
      if (parts.length === 0) parts.push(n < 80 ? Math.floor(n / 40) : 2, n < 80 ? n % 40 : n - 80);
      else parts.push(n);
      n = 0;
    }
  }
  return parts.join('.');
}

/** The session id of a serialized SSL_SESSION (i2d_SSL_SESSION: version, ssl version, cipher, session id, ...). */
export function sessionIdOf(session: Buffer): Buffer | undefined {
  try {
    const [seq] = readDer(session);
    const items = derChildren(seq);
    const id = items[3];
    return id && id.tag === 0x04 ? id.value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The recoding half of ngx_http_charset_filter_module: the tables one
 * `charset_map` block builds, and the per-response recoders that stream a
 * body through them. Byte for byte as nginx recodes:
 *
 * - between two 8-bit charsets, each byte through a 256-entry table (the
 *   unmapped upper half becomes `?`; the length does not change);
 * - from an 8-bit charset to utf-8, each byte to its utf-8 sequence
 *   (unmapped: `?`); a buffer whose bytes all map to one byte passes as it is;
 * - from utf-8 to an 8-bit charset, each character through the map; a
 *   character the map lacks becomes `&#N;`, invalid utf-8 `?`, and a
 *   character cut by the end of a buffer waits for the next one (one cut at
 *   the very end of the body is dropped).
 */

/** 8-bit → 8-bit: the byte each byte becomes. */
export interface ByteTable { kind: 'bytes'; bytes: Uint8Array }
/** 8-bit → utf-8: the utf-8 bytes each byte becomes. */
export interface ToUtf8Table { kind: 'toUtf8'; seqs: Buffer[] }
/** utf-8 → 8-bit: the byte for each mapped character below U+10000. */
export interface FromUtf8Table { kind: 'fromUtf8'; bytes: Map<number, number> }
export type RecodeTable = ByteTable | ToUtf8Table | FromUtf8Table;

const QUESTION = 0x3f;

/** The two directions one `charset_map src dst` block fills, before its lines (nginx's initial tables). */
export function newTables(dstIsUtf8: boolean): { there: RecodeTable; back: RecodeTable } {
  if (dstIsUtf8) {
    const seqs: Buffer[] = [];
    for (let i = 0; i < 256; i++) seqs.push(Buffer.from([i < 128 ? i : QUESTION]));
    return { there: { kind: 'toUtf8', seqs }, back: { kind: 'fromUtf8', bytes: new Map() } };
  }
  const identity = () => new Uint8Array(256).map((_, i) => (i < 128 ? i : QUESTION));
  return { there: { kind: 'bytes', bytes: identity() }, back: { kind: 'bytes', bytes: identity() } };
}

/** ngx_hextoi for a whole token: hex digits only, at least one; NaN otherwise. */
function hex(s: string): number {
  return /^[0-9a-fA-F]+$/.test(s) ? parseInt(s, 16) : NaN;
}

/**
 * One line of a charset_map block (`src dst`, hex): fills both directions.
 * Returns the token nginx calls an `invalid value`, or undefined.
 */
export function addMapLine(tables: { there: RecodeTable; back: RecodeTable }, from: string, to: string): string | undefined {
  const src = hex(from);
  if (!(src <= 255)) return from;
  const { there, back } = tables;
  if (there.kind === 'toUtf8' && back.kind === 'fromUtf8') {
    // up to three utf-8 bytes, one character below U+10000 (an ASCII byte is refused, as nginx refuses it)
    if (to.length % 2 !== 0 || to.length / 2 > 3) return to;
    const seq: number[] = [];
    for (let i = 0; i < to.length; i += 2) {
      const b = hex(to.slice(i, i + 2));
      if (Number.isNaN(b)) return to;
      seq.push(b);
    }
    const bytes = Buffer.from(seq);
    const [n] = utf8Decode(bytes, 0, bytes.length);
    if (n > 0xffff) return to;
    there.seqs[src] = bytes;
    back.bytes.set(n, src);
    return undefined;
  }
  const dst = hex(to);
  if (!(dst <= 255) || there.kind !== 'bytes' || back.kind !== 'bytes') return to;
  there.bytes[src] = dst;
  back.bytes[dst] = src;
  return undefined;
}

const INVALID = 0xffffffff;
const INCOMPLETE = 0xfffffffe;

/**
 * ngx_utf8_decode: the character at `p` and how many bytes it took;
 * INCOMPLETE (nothing taken) when the bytes before `end` are too few,
 * INVALID for a bad sequence (taking what nginx takes, up to the bad byte).
 */
function utf8Decode(b: Uint8Array, p: number, end: number): [number, number] {
  let u = b[p];
  let len: number;
  let valid: number;
  if (u >= 0xf0) { u &= 0x07; valid = 0xffff; len = 3; }
  else if (u >= 0xe0) { u &= 0x0f; valid = 0x7ff; len = 2; }
  else if (u >= 0xc2) { u &= 0x1f; valid = 0x7f; len = 1; }
  else return [INVALID, 1];
  if (end - p - 1 < len) return [INCOMPLETE, 0];
  let q = p + 1;
  while (len > 0) {
    const i = b[q++];
    if (i < 0x80) return [INVALID, q - p];
    u = (u << 6) | (i & 0x3f);
    len--;
  }
  return [u > valid ? u : INVALID, q - p];
}

/** A growing output buffer. */
class Out {
  buf: Buffer;
  len = 0;
  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }
  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + n));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }
  byte(c: number): void {
    this.room(1);
    this.buf[this.len++] = c;
  }
  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }
  entity(n: number): void {
    this.bytes(Buffer.from(`&#${n};`, 'latin1'));
  }
  done(): Buffer {
    return this.buf.subarray(0, this.len);
  }
}

/** nginx passes a leading stretch longer than this as it is (only where that can differ: to utf-8). */
const PASS_AS_IS = 512;

/** One response's recoder; keeps a utf-8 character cut by a buffer's end. */
export class Recoder {
  private readonly table: RecodeTable;
  private saved: Buffer | undefined;

  constructor(table: RecodeTable) {
    this.table = table;
  }

  recode(chunk: Buffer): Buffer {
    if (chunk.length === 0) return chunk;
    const t = this.table;
    if (t.kind === 'bytes') return recodeBytes(chunk, t.bytes);
    if (t.kind === 'toUtf8') return toUtf8(chunk, t.seqs);
    return this.fromUtf8(chunk, t.bytes);
  }

  /** ngx_http_charset_recode_from_utf8. */
  private fromUtf8(chunk: Buffer, map: Map<number, number>): Buffer {
    let src = 0;
    const end = chunk.length;
    if (this.saved === undefined) {
      while (src < end && chunk[src] < 0x80) src++;
      if (src === end) return chunk;
    }
    const out = new Out(end + 16);
    out.bytes(chunk.subarray(0, src));
    const saved = this.saved;
    if (saved !== undefined) {
      // the character cut at the end of the last buffer, completed from this one
      const joined = Buffer.concat([saved, chunk.subarray(0, Math.min(4 - saved.length, end))]);
      const [n, took] = utf8Decode(joined, 0, joined.length);
      if (n === INCOMPLETE) {
        this.saved = joined;
        return out.done();
      }
      this.saved = undefined;
      const c = n < 0x10000 ? map.get(n) : undefined;
      let used = took;
      if (c) out.byte(c);
      else if (n > 0x10ffff) {
        out.byte(QUESTION);
        used = Math.max(took, saved.length);
      } else out.entity(n);
      src = used - saved.length;
    }
    while (src < end) {
      const b = chunk[src];
      if (b < 0x80) {
        out.byte(b);
        src++;
        continue;
      }
      const [n, took] = utf8Decode(chunk, src, end);
      if (n === INCOMPLETE) {
        this.saved = Buffer.from(chunk.subarray(src));
        break;
      }
      src += took;
      if (n < 0x10000) {
        const c = map.get(n);
        if (c) out.byte(c);
        else out.entity(n);
      } else if (n > 0x10ffff) out.byte(QUESTION);
      else out.entity(n);
    }
    return out.done();
  }
}

/** ngx_http_charset_recode: a copy only when a byte changes (the chunk may be shared, e.g. with a cache file). */
function recodeBytes(chunk: Buffer, bytes: Uint8Array): Buffer {
  let i = 0;
  while (i < chunk.length && bytes[chunk[i]] === chunk[i]) i++;
  if (i === chunk.length) return chunk;
  const out = Buffer.from(chunk);
  for (; i < out.length; i++) out[i] = bytes[out[i]];
  return out;
}

/** ngx_http_charset_recode_to_utf8. */
function toUtf8(chunk: Buffer, seqs: Buffer[]): Buffer {
  let first = 0;
  while (first < chunk.length && seqs[chunk[first]].length === 1) first++;
  if (first === chunk.length) return chunk;
  const out = new Out(chunk.length * 2 + 16);
  let src = 0;
  if (first > PASS_AS_IS) {
    out.bytes(chunk.subarray(0, first));
    src = first;
  }
  for (; src < chunk.length; src++) out.bytes(seqs[chunk[src]]);
  return out.done();
}

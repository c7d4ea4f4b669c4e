/**
 * Sizes of HTTP/2 header blocks, for `$request_length` and `$bytes_sent`.
 * nginx counts the HEADERS (+CONTINUATION) payload a client sent and the
 * frames it sent itself; node:http2 does not expose frame sizes, so a block
 * is sized as HPACK (RFC 7541) encodes it with the static table only and no
 * Huffman coding: an exact match is one index, a known name an index and a
 * literal value, any other field two literals. That is exactly what simple
 * clients send (nginx's own tests do); for clients that use Huffman coding
 * and the dynamic table it is an upper bound.
 */

/** RFC 7541 Appendix A: the static table, index 1..61. */
const STATIC_TABLE: ReadonlyArray<readonly [string, string]> = [
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'],
  [':scheme', 'http'], [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'],
  [':status', '304'], [':status', '400'], [':status', '404'], [':status', '500'], ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'], ['accept-language', ''], ['accept-ranges', ''], ['accept', ''],
  ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''],
  ['etag', ''], ['expect', ''], ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''],
  ['if-modified-since', ''], ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''],
  ['last-modified', ''], ['link', ''], ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''],
  ['proxy-authorization', ''], ['range', ''], ['referer', ''], ['refresh', ''], ['retry-after', ''],
  ['server', ''], ['set-cookie', ''], ['strict-transport-security', ''], ['transfer-encoding', ''],
  ['user-agent', ''], ['vary', ''], ['via', ''], ['www-authenticate', ''],
];

/** Name → its first static index and the values that have an index of their own. */
const STATIC_NAMES = new Map<string, { index: number; values: Map<string, number> }>();
STATIC_TABLE.forEach(([name, value], i) => {
  let e = STATIC_NAMES.get(name);
  if (!e) STATIC_NAMES.set(name, (e = { index: i + 1, values: new Map() }));
  if (value !== '') e.values.set(value, i + 1);
});

/** Bytes of an HPACK integer with an N-bit prefix (RFC 7541 5.1). */
function intSize(value: number, prefixBits: number): number {
  const max = (1 << prefixBits) - 1;
  if (value < max) return 1;
  let n = 2;
  for (value -= max; value >= 128; value >>>= 7) n++;
  return n;
}

/** One field as a literal with incremental indexing (6-bit name index), or an index. `name` is lower case. */
export function fieldSize(name: string, value: string): number {
  const known = STATIC_NAMES.get(name);
  if (known !== undefined) {
    const exact = known.values.get(value);
    if (exact !== undefined) return intSize(exact, 7);
    return intSize(known.index, 6) + intSize(value.length, 7) + value.length;
  }
  return 1 + intSize(name.length, 7) + name.length + intSize(value.length, 7) + value.length;
}

/** HTTP/2 frame header (RFC 9113 4.1). */
export const FRAME_HEADER_SIZE = 9;

/**
 * Reading the TLS ClientHello before the handshake starts, so the server
 * block (SNI), its certificates (possibly named by variables and loaded
 * asynchronously), `ssl_reject_handshake` and the session to resume can be
 * decided first — nginx does the same from OpenSSL's callbacks. It also
 * gives what Node's TLS server does not expose: the client's cipher and
 * group lists (`$ssl_ciphers`, `$ssl_curves`).
 */

export interface ClientHello {
  /** SNI host name (as sent), or undefined. */
  serverName: string | undefined;
  /** Cipher suite code points, in the client's order. */
  ciphers: number[];
  /** supported_groups, in the client's order. */
  groups: number[];
  /** Groups of the key_share entries (TLS 1.3). */
  keyShares: number[];
  /** signature_algorithms code points. */
  sigalgs: number[];
  alpn: string[];
  /** legacy_session_id. */
  sessionId: Buffer;
  /** TLS 1.3 pre_shared_key identities (tickets or stateful session ids). */
  pskIdentities: Buffer[];
  /** TLS 1.2 session ticket (non-empty session_ticket extension). */
  ticket: Buffer | undefined;
  /** TLS versions offered (supported_versions, else the legacy version). */
  versions: number[];
  /** status_request (OCSP stapling wanted). */
  statusRequest: boolean;
}

/** What the first bytes of a connection on a TLS port are. */
export type HelloResult =
  | { kind: 'hello'; hello: ClientHello }
  | { kind: 'incomplete' }
  /** Not TLS at all (a plain HTTP request: nginx answers 497). */
  | { kind: 'plain' }
  /** TLS, but not a ClientHello we can read (let OpenSSL answer). */
  | { kind: 'tls' };

/** A ClientHello is at most a few KiB; refuse to buffer more than this. */
export const MAX_HELLO_BYTES = 64 * 1024;

/** Reads a ClientHello from the bytes received so far (one or more TLS records). */
export function readClientHello(data: Buffer): HelloResult {
  if (data.length === 0) return { kind: 'incomplete' };
  // 0x16 = handshake record; SSLv2-style hellos start with 0x80 (OpenSSL answers those)
  if (data[0] !== 0x16) return data[0] & 0x80 ? { kind: 'tls' } : { kind: 'plain' };
  // gather the handshake message from as many records as it spans
  const parts: Buffer[] = [];
  let have = 0;
  let need = -1;
  let pos = 0;
  while (pos + 5 <= data.length) {
    if (data[pos] !== 0x16) return { kind: 'tls' };
    const len = data.readUInt16BE(pos + 3);
    if (pos + 5 + len > data.length) break;
    parts.push(data.subarray(pos + 5, pos + 5 + len));
    have += len;
    pos += 5 + len;
    if (need < 0 && have >= 4) {
      const head = Buffer.concat(parts);
      if (head[0] !== 1) return { kind: 'tls' };
      need = 4 + head.readUIntBE(1, 3);
    }
    if (need >= 0 && have >= need) break;
  }
  if (need < 0 || have < need) return data.length > MAX_HELLO_BYTES ? { kind: 'tls' } : { kind: 'incomplete' };
  const msg = Buffer.concat(parts).subarray(4, need);
  try {
    return { kind: 'hello', hello: parseHello(msg) };
  } catch {
    return { kind: 'tls' };
  }
}

class Reader {
  pos = 0;
  readonly buf: Buffer;
  constructor(buf: Buffer) { this.buf = buf; }
  u8(): number { this.need(1); return this.buf[this.pos++]; }
  u16(): number { this.need(2); const v = this.buf.readUInt16BE(this.pos); this.pos += 2; return v; }
  bytes(n: number): Buffer { this.need(n); const b = this.buf.subarray(this.pos, this.pos + n); this.pos += n; return b; }
  get left(): number { return this.buf.length - this.pos; }
  private need(n: number): void { if (this.pos + n > this.buf.length) throw new RangeError('short ClientHello'); }
}

function u16List(b: Buffer): number[] {
  const out: number[] = [];
  for (let i = 0; i + 1 < b.length; i += 2) out.push(b.readUInt16BE(i));
  return out;
}

function parseHello(msg: Buffer): ClientHello {
  const r = new Reader(msg);
  const legacyVersion = r.u16();
  r.bytes(32);
  const sessionId = Buffer.from(r.bytes(r.u8()));
  const ciphers = u16List(r.bytes(r.u16()));
  r.bytes(r.u8());
  const hello: ClientHello = {
    serverName: undefined, ciphers, groups: [], keyShares: [], sigalgs: [], alpn: [], sessionId,
    pskIdentities: [], ticket: undefined, versions: [legacyVersion], statusRequest: false,
  };
  if (r.left < 2) return hello;
  const ext = new Reader(r.bytes(r.u16()));
  while (ext.left >= 4) {
    const type = ext.u16();
    const body = new Reader(ext.bytes(ext.u16()));
    switch (type) {
      case 0: { // server_name
        const list = new Reader(body.bytes(body.u16()));
        while (list.left >= 3) {
          const nameType = list.u8();
          const name = list.bytes(list.u16());
          if (nameType === 0) { hello.serverName = name.toString('latin1'); break; }
        }
        break;
      }
      case 5: hello.statusRequest = body.left > 0 && body.u8() === 1; break;
      case 10: hello.groups = u16List(body.bytes(body.u16())); break;
      case 13: hello.sigalgs = u16List(body.bytes(body.u16())); break;
      case 16: { // ALPN
        const list = new Reader(body.bytes(body.u16()));
        while (list.left >= 1) hello.alpn.push(list.bytes(list.u8()).toString('latin1'));
        break;
      }
      case 35: if (body.left > 0) hello.ticket = Buffer.from(body.bytes(body.left)); break;
      case 41: { // pre_shared_key
        const ids = new Reader(body.bytes(body.u16()));
        while (ids.left >= 6) {
          hello.pskIdentities.push(Buffer.from(ids.bytes(ids.u16())));
          ids.bytes(4);
        }
        break;
      }
      case 43: hello.versions = u16List(body.bytes(body.u8())); break;
      case 51: { // key_share
        const shares = new Reader(body.bytes(body.u16()));
        while (shares.left >= 4) {
          hello.keyShares.push(shares.u16());
          shares.bytes(shares.u16());
        }
        break;
      }
    }
  }
  return hello;
}

/** GREASE values (RFC 8701) are noise a client adds; they are not real ciphers or groups. */
export function isGrease(v: number): boolean {
  return (v & 0x0f0f) === 0x0a0a && (v >> 8) === (v & 0xff);
}

/** The TLS alert record nginx's OpenSSL sends when it refuses a handshake (fatal, `description`). */
export function alertRecord(description: number): Buffer {
  return Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, description]);
}

export const ALERT_UNRECOGNIZED_NAME = 112;
export const ALERT_INTERNAL_ERROR = 80;

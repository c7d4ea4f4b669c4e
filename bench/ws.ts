/**
 * The WebSocket case: an echo origin and a load client, both small RFC 6455
 * implementations over net sockets (text frames under 126 bytes, no
 * extensions). Each runs as its own process on the load core:
 *
 *   node bench/ws.ts origin                       prints the port it listens on
 *   node bench/ws.ts client PORT CONNS SECONDS    prints {"messages":N,"errors":N}
 *
 * Each client connection upgrades through the proxy, then sends one masked
 * frame at a time (clients must mask, RFC 6455 5.3) and sends the next when
 * the echo arrives; the origin echoes each frame's payload unmasked.
 */
import crypto from 'node:crypto';
import net from 'node:net';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** The payload of every message: small, as chat or market-data frames are. */
const PAYLOAD = Buffer.from('{"type":"tick","seq":12345,"v":1}');

/**
 * Complete frames at the start of `buf`: calls `onFrame(payload)` for each,
 * returns the bytes left over (a frame cut by the read).
 */
export function takeFrames(buf: Buffer, onFrame: (payload: Buffer) => void): Buffer {
  let off = 0;
  while (buf.length - off >= 2) {
    const masked = (buf[off + 1] & 0x80) !== 0;
    let len = buf[off + 1] & 0x7f;
    let head = 2;
    if (len === 126) {
      if (buf.length - off < 4) break;
      len = buf.readUInt16BE(off + 2);
      head = 4;
    } else if (len === 127) {
      throw new Error('bench ws: 64-bit frame lengths are not used here');
    }
    const keyAt = off + head;
    if (masked) head += 4;
    if (buf.length - off < head + len) break;
    const payload = Buffer.from(buf.subarray(off + head, off + head + len));
    if (masked) for (let i = 0; i < len; i++) payload[i] ^= buf[keyAt + (i & 3)];
    onFrame(payload);
    off += head + len;
  }
  return off === buf.length ? Buffer.alloc(0) : buf.subarray(off);
}

/** A text frame; masked with a fresh key when it goes from a client. */
export function frame(payload: Buffer, mask: boolean): Buffer {
  if (payload.length >= 126) throw new Error('bench ws: payloads stay under 126 bytes');
  const out = Buffer.allocUnsafe(2 + (mask ? 4 : 0) + payload.length);
  out[0] = 0x81; // FIN, text
  out[1] = (mask ? 0x80 : 0) | payload.length;
  if (!mask) {
    payload.copy(out, 2);
    return out;
  }
  const key = crypto.randomBytes(4);
  key.copy(out, 2);
  for (let i = 0; i < payload.length; i++) out[6 + i] = payload[i] ^ key[i & 3];
  return out;
}

function acceptKey(key: string): string {
  return crypto.createHash('sha1').update(key + GUID).digest('base64');
}

/** The echo origin; resolves its port. */
export function startEchoOrigin(): Promise<number> {
  const server = net.createServer((sock) => {
    sock.setNoDelay(true);
    let head = '';
    let rest: Buffer = Buffer.alloc(0);
    let open = false;
    sock.on('data', (d: Buffer) => {
      if (!open) {
        head += d.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        const key = /^sec-websocket-key:\s*(\S+)/im.exec(head.slice(0, end))?.[1];
        if (!key) { sock.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'); return; }
        sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptKey(key)}\r\n\r\n`);
        open = true;
        d = Buffer.from(head.slice(end + 4), 'latin1');
        if (d.length === 0) return;
      }
      rest = takeFrames(rest.length ? Buffer.concat([rest, d]) : d, (p) => sock.write(frame(p, false)));
    });
    sock.on('error', () => sock.destroy());
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', 4096, () => resolve((server.address() as net.AddressInfo).port)));
}

/** One client connection: upgrades, then echoes until `deadline`; resolves the messages echoed. */
function clientConnection(port: number, deadline: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.setNoDelay(true);
    const key = crypto.randomBytes(16).toString('base64');
    let upgraded = false;
    let head: Buffer = Buffer.alloc(0);
    let rest: Buffer = Buffer.alloc(0);
    let count = 0;
    sock.on('connect', () => sock.write(`GET /ws HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`));
    const onMessage = (p: Buffer) => {
      if (!p.equals(PAYLOAD)) { sock.destroy(); reject(new Error('bench ws: the echo differs from the message sent')); return; }
      count++;
      if (Date.now() < deadline) sock.write(frame(PAYLOAD, true));
      else sock.end();
    };
    sock.on('data', (d: Buffer) => {
      if (!upgraded) {
        head = Buffer.concat([head, d]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        const status = head.toString('latin1', 0, end);
        if (!status.startsWith('HTTP/1.1 101') || !status.includes(acceptKey(key))) {
          sock.destroy();
          reject(new Error(`bench ws: no upgrade: ${status.split('\r\n')[0]}`));
          return;
        }
        upgraded = true;
        d = head.subarray(end + 4);
        sock.write(frame(PAYLOAD, true));
        if (d.length === 0) return;
      }
      rest = takeFrames(rest.length ? Buffer.concat([rest, d]) : d, onMessage);
    });
    sock.on('error', reject);
    sock.on('close', () => resolve(count));
  });
}

/** `conns` connections echoing for `seconds`; the messages echoed and the connections that failed. */
export async function runClients(port: number, conns: number, seconds: number): Promise<{ messages: number; errors: number }> {
  const deadline = Date.now() + seconds * 1000;
  const results = await Promise.allSettled(Array.from({ length: conns }, () => clientConnection(port, deadline)));
  let messages = 0;
  let errors = 0;
  for (const r of results) {
    if (r.status === 'fulfilled') messages += r.value;
    else errors++;
  }
  return { messages, errors };
}

const [mode, ...args] = process.argv.slice(2);
if (import.meta.url === `file://${process.argv[1]}`) {
  if (mode === 'origin') console.log(await startEchoOrigin());
  else if (mode === 'client') {
    const [port, conns, seconds] = args.map(Number);
    console.log(JSON.stringify(await runClients(port, conns, seconds)));
  }
}

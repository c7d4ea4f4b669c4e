/**
 * Reading an accepted socket the way `net.connect({ onread })` reads a
 * connecting one: each read lands in one buffer the caller gives and goes
 * to a callback, with no Readable.push, no 'data' event and no new 64 KiB
 * buffer per read. net.Server has no option for this on the sockets it
 * accepts, so the socket gets the same three fields that option sets
 * (node's own onStreamRead reads them) and its handle the user buffer.
 * Pausing, resuming, 'end' and errors behave as with `onread`.
 *
 * Whoever takes such a socket over later (a tunnel) listens to 'data' as
 * usual: the callback then pushes a copy into the stream (see
 * `pushCopy`), which is what node does for a socket without `onread`.
 */
import net from 'node:net';

/** The callback's answer: false stops reading (as a full Readable would), true goes on. */
export type ReadCallback = (n: number, buf: Buffer) => boolean;

interface ReadFields {
  buffer: symbol;
  callback: symbol;
  generator: symbol;
}

/** The socket fields `onread` sets, found once on a socket made with the option. */
const fields: ReadFields | undefined = (() => {
  const probe = new net.Socket({ onread: { buffer: Buffer.alloc(1), callback: () => true } });
  const byName = new Map(Object.getOwnPropertySymbols(probe).map((s) => [s.description, s]));
  probe.destroy();
  const buffer = byName.get('kBuffer');
  const callback = byName.get('kBufferCb');
  const generator = byName.get('kBufferGen');
  return buffer && callback && generator ? { buffer, callback, generator } : undefined;
})();

interface UserBufferHandle {
  useUserBuffer?(buf: Uint8Array): void;
}

/**
 * Makes `socket`'s reads land in `buffer` and go to `callback`, before its
 * first read arrives. False when this node cannot (the socket then reads
 * as usual, through 'data').
 */
export function readInto(socket: net.Socket, buffer: Buffer, callback: ReadCallback): boolean {
  const handle = (socket as unknown as { _handle: UserBufferHandle | null })._handle;
  if (fields === undefined || handle === null || typeof handle.useUserBuffer !== 'function') return false;
  const s = socket as unknown as Record<symbol, unknown>;
  s[fields.buffer] = buffer;
  s[fields.callback] = callback;
  s[fields.generator] = null;
  handle.useUserBuffer(buffer);
  return true;
}

/** Passes a read on to the socket's stream ('data' listeners), as node does without `onread`. */
export function pushCopy(socket: net.Socket, n: number, buf: Buffer): boolean {
  return socket.push(Buffer.from(buf.subarray(0, n)));
}

/**
 * The host side of `io.open`/`io.lines` on the real filesystem (io.lua builds the file objects):
 * wasmoon's own io sees only emscripten's in-memory filesystem. Synchronous, as file I/O is in
 * OpenResty (it blocks the worker there too). Files are numbered handles; reads are buffered here.
 */
import fs from 'node:fs';
import { type HostFunction, type LuaBridge, LuaError } from './bridge.ts';

interface OpenFile {
  readonly fd: number;
  /** File position of the first byte not yet read into `pending` (or where the next write goes). */
  position: number;
  pending: Buffer;
  append: boolean;
}

const MESSAGES: Record<string, [string, number]> = {
  ENOENT: ['No such file or directory', 2], EACCES: ['Permission denied', 13], EISDIR: ['Is a directory', 21],
  ENOTDIR: ['Not a directory', 20], EEXIST: ['File exists', 17], EROFS: ['Read-only file system', 30], EBADF: ['Bad file descriptor', 9],
};
const FLAGS: Record<string, string> = { r: 'r', w: 'w', a: 'a', 'r+': 'r+', 'w+': 'w+', 'a+': 'a+' };
const CHUNK = 65536;

export function ioHelpers(bridge: LuaBridge): Record<string, HostFunction> {
  const files = new Map<number, OpenFile>();
  let nextId = 1;

  const file = (L: number): OpenFile => {
    const f = files.get(bridge.toInteger(L, 1) ?? 0);
    if (!f) throw new LuaError('attempt to use a closed file');
    return f;
  };
  /** Lua's failure triple: nil, "path: message", errno. */
  const failure = (L: number, e: unknown, path?: string) => {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    const [message, errno] = MESSAGES[code] ?? [(e as Error).message, 0];
    bridge.pushNil(L);
    bridge.pushString(L, path === undefined ? message : `${path}: ${message}`);
    bridge.pushInteger(L, errno);
    return 3;
  };
  /** Reads more bytes into `pending`; false at end of file. */
  const fill = (f: OpenFile): boolean => {
    const chunk = Buffer.allocUnsafe(CHUNK);
    const n = fs.readSync(f.fd, chunk, 0, CHUNK, f.position);
    if (n === 0) return false;
    f.position += n;
    f.pending = f.pending.length ? Buffer.concat([f.pending, chunk.subarray(0, n)]) : chunk.subarray(0, n);
    return true;
  };
  const take = (L: number, f: OpenFile, n: number) => {
    bridge.pushBytes(L, f.pending.subarray(0, n));
    f.pending = f.pending.subarray(n);
  };

  return {
    open(L) {
      const path = bridge.toString(L, 1) ?? '';
      const mode = (bridge.toString(L, 2) ?? 'r').replace('b', '');
      const flags = FLAGS[mode];
      if (!flags) throw new LuaError(`bad argument #2 to 'open' (invalid mode '${mode}')`);
      try {
        const fd = fs.openSync(Buffer.from(path, 'latin1'), flags);
        const id = nextId++;
        files.set(id, { fd, position: 0, pending: Buffer.alloc(0), append: mode.startsWith('a') });
        bridge.pushInteger(L, id);
        return 1;
      } catch (e) {
        return failure(L, e, path);
      }
    },
    /** read(id, what): what = "a" (all), "l"/"L" (a line without/with its newline), or a byte count. */
    read(L) {
      const f = file(L);
      const what = bridge.toString(L, 2) ?? 'l';
      try {
        if (what === 'a') {
          while (fill(f));
          take(L, f, f.pending.length);
          return 1;
        }
        if (what === 'l' || what === 'L') {
          let nl = f.pending.indexOf(10);
          while (nl < 0 && fill(f)) nl = f.pending.indexOf(10);
          if (nl < 0 && f.pending.length === 0) return 0;
          if (nl < 0) take(L, f, f.pending.length);
          else {
            bridge.pushBytes(L, f.pending.subarray(0, what === 'L' ? nl + 1 : nl));
            f.pending = f.pending.subarray(nl + 1);
          }
          return 1;
        }
        const count = Number(what);
        while (f.pending.length < count && fill(f));
        if (f.pending.length === 0 && count > 0) return 0;
        take(L, f, Math.min(count, f.pending.length));
        return 1;
      } catch (e) {
        return failure(L, e);
      }
    },
    write(L) {
      const f = file(L);
      const data = bridge.toBuffer(L, 2) ?? Buffer.alloc(0);
      try {
        const at = f.append ? null : f.position - f.pending.length;
        const n = fs.writeSync(f.fd, data, 0, data.length, at);
        if (at !== null) f.position = at + n;
        f.pending = Buffer.alloc(0);
        bridge.pushBoolean(L, true);
        return 1;
      } catch (e) {
        return failure(L, e);
      }
    },
    seek(L) {
      const f = file(L);
      const whence = bridge.toString(L, 2) ?? 'cur';
      const offset = bridge.toInteger(L, 3) ?? 0;
      const current = f.position - f.pending.length;
      const base = whence === 'set' ? 0 : whence === 'end' ? fs.fstatSync(f.fd).size : current;
      if (whence !== 'set' && whence !== 'cur' && whence !== 'end') throw new LuaError(`bad argument #1 to 'seek' (invalid option '${whence}')`);
      f.position = Math.max(0, base + offset);
      f.pending = Buffer.alloc(0);
      bridge.pushInteger(L, f.position);
      return 1;
    },
    close(L) {
      const id = bridge.toInteger(L, 1) ?? 0;
      const f = files.get(id);
      if (f) {
        files.delete(id);
        fs.closeSync(f.fd);
      }
      bridge.pushBoolean(L, true);
      return 1;
    },
  };
}

/**
 * The host side of `require` and `loadfile` (package.lua): Lua files are read from the real
 * filesystem (wasmoon's own io and loaders see only emscripten's in-memory one). Synchronous, as
 * require is in OpenResty: it runs while a hook starts, and the files come from the page cache.
 */
import fs from 'node:fs';
import type { HostFunction, LuaBridge } from './bridge.ts';

/** The defaults of Debian's nginx + libnginx-mod-http-lua (LuaJIT's, with Debian's directories in front). */
export const DEFAULT_PACKAGE_PATH = '/usr/share/lua/5.1/?.lua;./?.lua;/usr/share/luajit-2.1.0-beta3/?.lua;/usr/local/share/lua/5.1/?.lua;/usr/local/share/lua/5.1/?/init.lua;/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua';
export const DEFAULT_PACKAGE_CPATH = './?.so;/usr/local/lib/lua/5.1/?.so;/usr/lib/x86_64-linux-gnu/lua/5.1/?.so;/usr/local/lib/lua/5.1/loadall.so';

/** Debian's module puts this (its LUA_DEFAULT_PATH) and a `;` in front of LuaJIT's package.path. */
const DEBIAN_PATH_HEAD = '/usr/share/lua/5.1/?.lua;';

/**
 * The default paths as LuaJIT sets them from the environment (LUA_PATH, LUA_CPATH: the value,
 * `;;` standing for LuaJIT's built-in default), Debian's head in front of the path as its module
 * puts it; the built-in defaults when the variables are not set.
 */
export function pathsFromEnv(path: string | undefined, cpath: string | undefined): { path: string; cpath: string } {
  const luajitPath = DEFAULT_PACKAGE_PATH.slice(DEBIAN_PATH_HEAD.length);
  return {
    path: path === undefined ? DEFAULT_PACKAGE_PATH : `${DEBIAN_PATH_HEAD};${path.replaceAll(';;', `;${luajitPath};`)}`,
    cpath: cpath === undefined ? DEFAULT_PACKAGE_CPATH : cpath.replaceAll(';;', `;${DEFAULT_PACKAGE_CPATH};`),
  };
}

/** `path` is Lua's bytes (latin1 here), so a UTF-8 name reaches the filesystem unchanged. */
function readFile(path: string): Buffer | undefined {
  try {
    return fs.readFileSync(Buffer.from(path, 'latin1'));
  } catch {
    return undefined;
  }
}

/** The files a template path gives for a module name (`a.b` → `a/b`), in order. */
export function candidates(name: string, path: string): string[] {
  const file = name.replaceAll('.', '/');
  return path.split(';').filter((t) => t !== '').map((t) => t.replaceAll('?', file));
}

export function packageHelpers(bridge: LuaBridge): Record<string, HostFunction> {
  const notFound = (L: number, files: string[]) => {
    bridge.pushNil(L);
    bridge.pushString(L, files.map((f) => `no file '${f}'`).join('\n\t'));
    return 2;
  };
  return {
    find_module(L) {
      const files = candidates(bridge.toString(L, 1) ?? '', bridge.toString(L, 2) ?? '');
      for (const file of files) {
        const code = readFile(file);
        if (code === undefined) continue;
        bridge.pushBytes(L, code);
        bridge.pushString(L, file);
        return 2;
      }
      return notFound(L, files);
    },
    find_c_module(L) {
      const files = candidates(bridge.toString(L, 1) ?? '', bridge.toString(L, 2) ?? '');
      const found = files.find((f) => fs.existsSync(Buffer.from(f, 'latin1')));
      if (found === undefined) return notFound(L, files);
      bridge.pushString(L, found);
      return 1;
    },
    read_file(L) {
      const name = bridge.toString(L, 1);
      const code = name === undefined ? undefined : readFile(name);
      if (code === undefined) {
        bridge.pushNil(L);
        bridge.pushString(L, `cannot open ${name ?? '(stdin)'}`);
        return 2;
      }
      bridge.pushBytes(L, code);
      return 1;
    },
  };
}

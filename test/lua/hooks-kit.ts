// Shared by test/lua/hooks-*.test.ts: Gatehouse and Debian's nginx + libnginx-mod-http-lua on the
// same configuration (the load_module lines are in the file itself: Gatehouse accepts them as
// built in, so the chunk names' line numbers agree), the same requests, and what a client sees
// normalized where the two servers differ by name only (Date, Server, the version in error pages).
import assert from 'node:assert/strict';
import { startPair } from '../kit/pair.ts';
import type { Pair } from '../kit/pair.ts';
import { rawRequest, parseResponse } from '../kit/client.ts';
import type { RunningServer } from '../kit/server.ts';
import { maskNameInResponse } from '../kit/server-name.ts';

export const LUA_MODULES = 'load_module /usr/lib/nginx/modules/ndk_http_module.so;\n'
  + 'load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;\n';

/** Both servers on `http` (the inside of an http block; `listen %%PORT_8080%%` in its server); `main` goes before it. */
export function luaPair(t: { after(fn: () => unknown): void }, http: string, files?: Record<string, string>, main = ''): Promise<Pair> {
  return startPair(t, { conf: `${LUA_MODULES}${main}events {}\nhttp {\n    access_log off;\n${http}\n}\n`, files });
}

export interface Seen {
  status: number;
  headers: Array<[string, string]>;
  body: string;
  complete: boolean;
}

/** A response without what only names the server: Date, Server, the version under error pages. */
export function seen(raw: Buffer): Seen {
  if (raw.length === 0) return { status: 0, headers: [], body: '', complete: false };
  const r = parseResponse(raw);
  const m = maskNameInResponse(r.headers, r.body.toString('latin1'), r.status);
  return {
    status: r.status,
    headers: m.headers.filter(([n]) => !/^(date|server)$/i.test(n)),
    body: m.body,
    complete: r.complete,
  };
}

/** `GET path` (or a request line) to `srv`'s port 8080 with `extra` header lines and `body`, connection closed after it. */
export async function ask(srv: RunningServer, path: string, extra = '', body = ''): Promise<Seen> {
  const head = path.includes(' ') ? path : `GET ${path} HTTP/1.1`;
  return seen(await rawRequest(srv.port(8080), `${head}\r\nHost: localhost\r\n${extra}Connection: close\r\n\r\n${body}`));
}

/** Asks both servers; Gatehouse's answer must equal nginx's. Returns Gatehouse's. */
export async function same(pair: Pair, path: string, extra = '', body = ''): Promise<Seen> {
  const gh = await ask(pair.gh, path, extra, body);
  if (pair.ng) assert.deepEqual(gh, await ask(pair.ng, path, extra, body), `${path}: Gatehouse and nginx differ`);
  return gh;
}

/** error.log lines matching `re` once one is there, as `[level] message` (time, pid and connection number dropped). */
export async function logged(srv: RunningServer, re: RegExp): Promise<string[]> {
  await srv.waitForLog('error.log', re, 10_000);
  return srv.readFile('error.log').split('\n').filter((l) => re.test(l))
    .map((l) => l.replace(/^\S+ \S+ (\[\w*\]) \d+#\d+: (\*\d+ )?/, '$1 ').replace(/(server: [\d.]+):\d+/, '$1:PORT'));
}

/** Gatehouse's lines for `re` equal nginx's. Returns Gatehouse's. */
export async function sameLog(pair: Pair, re: RegExp): Promise<string[]> {
  const gh = await logged(pair.gh, re);
  if (pair.ng) assert.deepEqual(gh, await logged(pair.ng, re));
  return gh;
}

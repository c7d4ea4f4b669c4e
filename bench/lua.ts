/**
 * The Lua cases (issue #13): what an OpenResty hook costs in Gatehouse
 * against Debian's nginx with libnginx-mod-http-lua, on the same config,
 * one worker each, pinned as the other cases are. A hook's cost is the
 * CPU per request of a location with it minus that of the same location
 * without it, measured in the same round: `content_by_lua_block
 * { ngx.say("ok") }` against `return 200 "ok\n"`, and an
 * `access_by_lua_block` reading a header into a variable in front of the
 * proxy against the bare proxy. A body filter upper-casing a 1 MiB proxied
 * response is compared whole.
 */
import { wrkRun } from './cases.ts';
import { cpuMicros } from './proc.ts';
import { report, rounds, type Figures, type Kind } from './rounds.ts';
import { freePort, startGatehouse, startNginx, startServer } from '../test/kit/server.ts';
import { PROXY_CORE, startOrigin, wrap, type BenchServer } from './servers.ts';

/** The Lua cases' configuration, the same for both servers (bench/lua-ab.ts runs it too). */
export function luaConf(port: number, originPort: number): string {
  return `
worker_processes 1;
events { worker_connections 20000; }
http {
    access_log off;
    keepalive_requests 1000000;
    upstream origin {
        server 127.0.0.1:${originPort};
        keepalive 64;
    }
    server {
        listen 127.0.0.1:${port} backlog=4096;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        location = /plain { return 200 "ok\\n"; }
        location = /lua { content_by_lua_block { ngx.say("ok") } }
        location = /proxy { proxy_pass http://origin/small; }
        location = /access {
            set $bench_client "";
            access_by_lua_block { ngx.var.bench_client = ngx.req.get_headers()["user-agent"] or "none" }
            proxy_pass http://origin/small;
        }
        location = /upper {
            body_filter_by_lua_block { ngx.arg[1] = string.upper(ngx.arg[1]) }
            proxy_pass http://origin/1m;
        }
    }
}
`;
}

/** The server under test with the Lua configuration; `binary`: another Gatehouse tree's bin/gatehouse. */
export async function startLuaProxy(kind: Kind, originPort: number, binary?: string): Promise<BenchServer> {
  const port = await freePort();
  const opts = { conf: luaConf(port, originPort), errorLogLevel: 'error', timeoutMs: 60000, nginxModules: ['ngx_http_lua_module'] };
  const s = kind === 'nginx' ? await startNginx(opts) : binary ? await startServer(binary, opts) : await startGatehouse(opts);
  return wrap(kind, s, port, PROXY_CORE);
}

const PATHS = ['plain', 'lua', 'proxy', 'access', 'upper'];

export async function luaCases(seconds: number, warmupSeconds: number): Promise<void> {
  const origin = await startOrigin();
  const servers: Record<Kind, BenchServer> = {
    nginx: await startLuaProxy('nginx', origin.port),
    gatehouse: await startLuaProxy('gatehouse', origin.port),
  };
  // five locations per round: each runs half the usual time
  const each = Math.max(2, Math.round(seconds / 2));
  console.log(`\nLua hooks (nginx: Debian's + libnginx-mod-http-lua), wrk ${each}s -c50 per location`);
  try {
    const r = await rounds(servers, async (s) => {
      const f: Figures = {};
      for (const p of PATHS) {
        const cpu0 = cpuMicros(s.pid);
        const w = await wrkRun(s.port, `/${p}`, each, 50);
        if (w.errors) console.log(`  ${s.kind} /${p}: ${w.errors} socket errors or non-2xx responses`);
        f[p] = w.requests ? (cpuMicros(s.pid) - cpu0) / w.requests : NaN;
      }
      f.contentAdds = f.lua - f.plain;
      f.accessAdds = f.access - f.proxy;
      return f;
    }, async (s) => { for (const p of PATHS) await wrkRun(s.port, `/${p}`, Math.min(warmupSeconds, 3), 50); });
    const t = 'Lua';
    report(t, 'content_by_lua ngx.say: CPU per request', 'µs', r, 'lua');
    report(t, 'content_by_lua: CPU the hook adds', 'µs', r, 'contentAdds', { ratioAtMost: 2.0 });
    report(t, 'access_by_lua + proxy: CPU per request', 'µs', r, 'access');
    report(t, 'access_by_lua: CPU the hook adds', 'µs', r, 'accessAdds', { ratioAtMost: 2.0 });
    report(t, 'body_filter_by_lua upper 1 MiB: CPU per request', 'µs', r, 'upper', { ratioAtMost: 2.0 });
  } finally {
    for (const s of [servers.nginx, servers.gatehouse, origin]) await s.stop();
  }
}

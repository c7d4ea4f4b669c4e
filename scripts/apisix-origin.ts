/**
 * APISIX's test upstream for the plugin triage: its t/lib/server.lua (the
 * OpenResty handlers behind 127.0.0.1:1980..1982 in APISIX's tests: /hello,
 * /uri, /headers, /status...) run by Gatehouse itself (`gatehouse -c`), read
 * at run time from an export of the mirror, never copied into this tree.
 * The one module it needs that is not in the export, toolkit.json (a git
 * submodule), is two lines over cjson written here.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import * as net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gatehouseBinary } from '../test/kit/server.ts';

export const ORIGIN_PORTS = [1980, 1981, 1982];

/** True when something on the loopback already answers on the port. */
function taken(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

export interface TestOrigin { stop(): Promise<void> }

/** Starts server.lua of the APISIX export at `home` on 127.0.0.1:1980-1982; refuses when one of them is taken. */
export async function startApisixOrigin(home: string): Promise<TestOrigin> {
  for (const p of ORIGIN_PORTS) {
    if (await taken(p)) throw new Error(`127.0.0.1:${p} is already in use by another process: not starting APISIX's test origin (nothing was stopped)`);
  }
  if (!fs.existsSync(path.join(home, 't/lib/server.lua'))) throw new Error(`${home}/t/lib/server.lua not found: export the mirror there first`);
  const prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-apisix-origin-'));
  fs.mkdirSync(path.join(prefix, 'logs'));
  fs.mkdirSync(path.join(prefix, 'lua/toolkit'), { recursive: true });
  fs.writeFileSync(path.join(prefix, 'lua/toolkit/json.lua'), 'local cjson = require("cjson.safe")\nreturn { encode = cjson.encode, decode = cjson.decode }\n');
  // the package path as t/APISIX.pm sets it (APISIX's tree, apisix/, t/), the shim first
  const lpath = [`${prefix}/lua/?.lua`, `${home}/?.lua`, `${home}/?/init.lua`, `${home}/apisix/?.lua`, `${home}/t/?.lua`].join(';');
  const conf = `daemon off;
worker_processes 1;
error_log logs/error.log warn;
pid logs/nginx.pid;
events {}
http {
    access_log off;
    lua_package_path "${lpath};;";
    server {
${ORIGIN_PORTS.map((p) => `        listen 127.0.0.1:${p};`).join('\n')}
        server_tokens off;
        location / {
            content_by_lua_block {
                require("lib.server").go()
            }
        }
    }
}
`;
  fs.writeFileSync(path.join(prefix, 'origin.conf'), conf);
  const child: ChildProcess = spawn(gatehouseBinary, ['-p', prefix, '-c', path.join(prefix, 'origin.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => { stderr += b.toString(); });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  process.once('exit', () => child.kill('SIGKILL'));
  const pidFile = path.join(prefix, 'logs/nginx.pid');
  const deadline = Date.now() + 30_000;
  while (!(fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').endsWith('\n'))) {
    if (child.exitCode !== null) throw new Error(`the test origin exited:\n${stderr}`);
    if (Date.now() > deadline) { child.kill('SIGKILL'); throw new Error(`the test origin was not ready after 30 s:\n${stderr}`); }
    await sleep(25);
  }
  return {
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGQUIT');
      await exited;
    },
  };
}

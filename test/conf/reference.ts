// Runs one configuration through `BINARY -t` (or -T, -q, -g ...) in a fresh
// prefix and returns what a user sees, normalised so that Debian's nginx and
// Gatehouse can be compared byte for byte: the prefix becomes DIR, the
// program name `nginx:`/`gatehouse:` becomes `PROG:`, and error.log lines
// lose their time stamp and pid#tid.

import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gatehouseBinary, nginxBinary, nginxModulesDir, nginxSkip } from '../kit/server.ts';
import { modules } from '../../src/modules.ts';

/** load_module lines that give Debian's nginx OpenResty's Lua module. */
export const NGINX_LUA = `load_module ${nginxModulesDir}/ndk_http_module.so; load_module ${nginxModulesDir}/ngx_http_lua_module.so;`;

export interface ConfCase {
  name: string;
  /** Files under the prefix; `%%PREFIX%%` becomes the prefix (no trailing slash). */
  files: Record<string, string | Buffer>;
  /** Flags after `-p DIR/ -c nginx.conf -e error.log` (default `-t`). */
  flags?: string[];
  /**
   * `-g` directives. Default `pid nginx.pid;`, so that -t never touches the
   * compiled-in pid path (Debian's is /run/nginx.pid); '' passes no -g.
   */
  globals?: string;
  /** The configuration file name given to -c (default nginx.conf). */
  conf?: string;
  /** Runs in the prefix before the binary (make directories, links, ...). */
  setup?: (dir: string) => void;
  /** `-g` directives for nginx only, after `globals` (e.g. load_module lines for Debian's dynamic modules). */
  nginxGlobals?: string;
  /** A Gatehouse module the case needs (nginx name); the case is skipped while it is not built in. */
  needs?: string;
  /** Only for Gatehouse, with the reason nginx cannot be the reference, and what it must print. */
  gatehouseOnly?: { reason: string; stderr: string; code: number };
}

export interface Outcome {
  code: number;
  stderr: string;
  stdout: string;
  errorLog: string;
  /** Files in the prefix afterwards (-t creates the pid file and log files), new ones with their sizes. */
  files: string[];
}

export async function runCase(binary: 'nginx' | 'gatehouse', c: ConfCase): Promise<Outcome> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `conf-${binary}-`));
  try {
    fs.chmodSync(dir, 0o755);
    // Gatehouse's compiled-in default access log is logs/access.log under the prefix (nginx's upstream
    // default; Debian's nginx uses /var/log/nginx/access.log): let both open theirs
    fs.mkdirSync(path.join(dir, 'logs'));
    for (const [name, content] of Object.entries(c.files)) {
      const file = path.join(dir, name);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, typeof content === 'string' ? Buffer.from(content.replaceAll('%%PREFIX%%', dir), 'latin1') : content);
    }
    c.setup?.(dir);
    const args = ['-p', `${dir}/`, '-c', c.conf ?? 'nginx.conf', '-e', 'error.log', ...(c.flags ?? ['-t'])];
    const globals = (c.globals ?? 'pid nginx.pid;') + (binary === 'nginx' && c.nginxGlobals ? ` ${c.nginxGlobals}` : '');
    if (globals !== '') args.push('-g', globals);
    const { code, stdout, stderr } = await run(binary === 'nginx' ? nginxBinary : gatehouseBinary, args);
    let errorLog = '';
    try { errorLog = fs.readFileSync(path.join(dir, 'error.log'), 'latin1'); } catch { /* none written */ }
    const norm = (s: string): string => s.replaceAll(dir, 'DIR');
    const files = (fs.readdirSync(dir, { recursive: true }) as string[])
      .filter((f) => f !== 'error.log' && f !== 'logs/access.log' && fs.statSync(path.join(dir, f)).isFile())
      .map((f) => (f in c.files ? f : `${f}:${fs.statSync(path.join(dir, f)).size}`))
      .sort();
    return {
      files,
      code,
      stdout: norm(stdout),
      stderr: norm(stderr).replace(/^(nginx|gatehouse): /gm, 'PROG: '),
      errorLog: norm(errorLog).replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[(\w+)\] \d+#\d+: /gm, '[$1] '),
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function run(file: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // the compile cache makes Gatehouse's start (hence this corpus) about three times faster
    const env = { ...process.env, NODE_COMPILE_CACHE: path.join(os.tmpdir(), 'gatehouse-test-compile-cache') };
    execFile(file, args, { encoding: 'latin1', timeout: 20_000, env }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : err.signal ? 128 : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * One test per case: nginx and Gatehouse must show the same outcome; a
 * gatehouseOnly case is checked against its stated output instead.
 */
export function compareWithNginx(title: string, cases: ConfCase[]): void {
  test(`${title}: case names are unique`, () => {
    assert.equal(new Set(cases.map((c) => c.name)).size, cases.length);
  });
  // the cases run two at a time, each a few process starts: the whole may take longer than
  // npm test's per-test limit on a busy machine, so it gets each case's own limit (20 s) in all
  test(title, { concurrency: 2, timeout: Math.max(120_000, cases.length * 20_000) }, async (t) => {
    for (const c of cases) {
      const only = c.gatehouseOnly;
      if (only) {
        void t.test(`${c.name} (gatehouse only: ${only.reason})`, async () => {
          const got = await runCase('gatehouse', c);
          assert.equal(got.stderr, only.stderr);
          assert.equal(got.code, only.code);
        });
        continue;
      }
      const missing = c.needs && !modules.some((m) => m.name === c.needs) ? `needs ${c.needs}, not built in yet` : false;
      void t.test(c.name, { skip: nginxSkip || missing }, async () => {
        const [want, got] = await Promise.all([runCase('nginx', c), runCase('gatehouse', c)]);
        assert.deepEqual(got, want);
      });
    }
  });
}

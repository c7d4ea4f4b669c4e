/**
 * A real php-fpm (Debian's php8.2-fpm) for the fastcgi tests: its own
 * configuration in a temporary directory (a pool on a loopback port, one on
 * a unix socket, clear_env, logs and pid there), PHP scripts the tests
 * write, started in the foreground as root (-R) and stopped after the test.
 * Also the comparison the CGI-backend tests make: one request to Gatehouse
 * and to nginx, the response and the error-log lines it caused.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { rawExchange } from '../kit/client.ts';
import type { Pair } from '../kit/pair.ts';
import { freePort } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { normalise } from '../proxy/differential-kit.ts';
import { maskServerName } from '../kit/server-name.ts';

/** Debian's php-fpm binary carries the PHP version in its name (php-fpm8.2 on bookworm). */
function findPhpFpm(): string {
  try {
    const found = fs.readdirSync('/usr/sbin').filter((f) => /^php-fpm\d/.test(f)).sort().pop();
    if (found) return `/usr/sbin/${found}`;
  } catch { /* no /usr/sbin */ }
  return '/usr/sbin/php-fpm8.2';
}

export const PHP_FPM = process.env.PHP_FPM_BINARY ?? findPhpFpm();
export const phpFpmSkip: string | false = fs.existsSync(PHP_FPM) ? false : `${PHP_FPM} is not installed`;

export interface PhpFpm {
  /** Where the scripts are (the `root` of a location passing to php-fpm). */
  dir: string;
  port: number;
  socket: string;
  /** php-fpm's own log. */
  log(): string;
  stop(): Promise<void>;
}

function pool(name: string, listen: string, extra = ''): string {
  return `[${name}]
listen = ${listen}
listen.mode = 0666
pm = static
pm.max_children = 4
clear_env = yes
catch_workers_output = no
php_admin_flag[log_errors] = on
php_admin_flag[display_errors] = off
php_admin_value[output_buffering] = 0
${extra}`;
}

/** Waits until something accepts connections at `where` (an event, with a deadline for a starting process). */
async function waitListening(where: { port: number } | { path: string }, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`php-fpm exited: ${log()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(where as net.NetConnectOpts);
      s.once('connect', () => { s.destroy(); resolve(true); });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`php-fpm did not listen: ${log()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Starts php-fpm with `scripts` (name → PHP source) in its directory. */
export async function startPhpFpm(scripts: Record<string, string>): Promise<PhpFpm> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-fpm-'));
  fs.chmodSync(dir, 0o755);
  for (const [name, src] of Object.entries(scripts)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), src, { mode: 0o644 });
  }
  const port = await freePort();
  const socket = path.join(dir, 'php-fpm.sock');
  const conf = `[global]
pid = ${dir}/php-fpm.pid
error_log = ${dir}/php-fpm.log
daemonize = no
${pool('tcp', `127.0.0.1:${port}`)}
${pool('unix', socket)}
`;
  fs.writeFileSync(path.join(dir, 'php-fpm.conf'), conf);
  const child = spawn(PHP_FPM, ['-F', '-R', '-n', '-y', path.join(dir, 'php-fpm.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); });
  const log = () => {
    try { return fs.readFileSync(path.join(dir, 'php-fpm.log'), 'utf8') + stderr; } catch { return stderr; }
  };
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitListening({ port }, child, log);
    await waitListening({ path: socket }, child, log);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    dir, port, socket, log,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGQUIT');
        const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(t);
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** What one request caused: the response and the error-log lines (warn and above), normalised. */
export interface Seen { response: string; errors: string[] }

async function observe(srv: RunningServer, raw: string): Promise<Seen> {
  const port = srv.port(8080);
  const from = srv.logSize('error.log');
  const accessFrom = srv.logSize('access.log');
  const ex = await rawExchange(port, raw, { timeoutMs: 10_000 });
  // the request's error lines are written before its access line
  await srv.waitForLog('access.log', /\n/, 5000, accessFrom);
  const errors = srv.readFile('error.log').slice(from).split('\n').filter((l) => /\[(warn|error|crit|alert)\]/.test(l))
    .map((l) => normalise(l, port));
  return { response: normalise(maskServerName(ex.data.toString('latin1')), port).replaceAll(srv.prefix, 'PREFIX'), errors };
}

/** Sends `raw` to Gatehouse and nginx (when installed); asserts they agree and returns what Gatehouse gave. */
export async function both(pair: Pair, raw: string): Promise<Seen> {
  const gh = await observe(pair.gh, raw);
  if (pair.ng) assert.deepEqual(gh, await observe(pair.ng, raw));
  return gh;
}

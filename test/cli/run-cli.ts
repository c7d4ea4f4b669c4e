// Runs a command-line binary (bin/gatehouse or Debian's nginx) to completion
// and normalizes what it prints, so the two can be compared line for line.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export interface CliResult {
  /** The pid of the process started. */
  pid: number;
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(binary: string, args: string[], opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, ...opts.env };
    // bin/gatehouse may fall back to `node` on PATH: make that this Node
    env.PATH = `${path.dirname(process.execPath)}:${env.PATH ?? '/usr/bin:/bin'}`;
    const child = spawn(binary, args, { cwd: opts.cwd ?? os.tmpdir(), env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${binary} ${args.join(' ')}: no exit within ${opts.timeoutMs ?? 15000} ms`));
    }, opts.timeoutMs ?? 15000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ pid: child.pid ?? 0, code, stdout: Buffer.concat(out).toString('latin1'), stderr: Buffer.concat(err).toString('latin1') });
    });
  });
}

/**
 * What a program said, comparable across nginx and gatehouse: the program
 * name becomes NAME, error-log lines lose their time and PID#TID prefix
 * (`2026/01/01 00:00:00 [emerg] 12#12: x` → `[emerg] x`), and temp paths
 * become DIR.
 */
export function normalize(text: string, dir?: string): string {
  let s = text.replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: (\*\d+ )?/gm, '$1 ');
  s = s.replace(/^(nginx|gatehouse): /gm, 'NAME: ');
  if (dir) s = s.split(dir).join('DIR');
  return s;
}

/** A private directory for one test, removed by the returned cleanup. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-cli-'));
  fs.chmodSync(dir, 0o755);
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

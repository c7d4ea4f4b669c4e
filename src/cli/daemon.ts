/**
 * `daemon on`: the started process re-runs itself detached and returns to
 * its caller once the background copy listens (exit 0) or failed (exit 1,
 * with the error on stderr). The pid file holds the background process.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';

const ENV = 'GATEHOUSE_DAEMON_CHILD';

export function isDaemonChild(): boolean {
  return process.env[ENV] === '1' && typeof process.send === 'function';
}

export function daemonize(argv: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...process.execArgv, process.argv[1], ...argv], {
      detached: true,
      stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
      env: { ...process.env, [ENV]: '1' },
    });
    child.once('message', (m: { error?: string }) => {
      if (m.error) fs.writeSync(2, `gatehouse: [emerg] ${m.error}\n`);
      child.disconnect();
      child.unref();
      resolve(m.error ? 1 : 0);
    });
    child.once('exit', (code) => resolve(code || 1));
  });
}

/** Tells the waiting foreground process that we listen (or failed). */
export function reportDaemonReady(error?: string): void {
  if (!isDaemonChild()) return;
  delete process.env[ENV];
  process.send!({ error }, () => process.disconnect());
}

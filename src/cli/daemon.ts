/**
 * `daemon on`: once the configuration is checked and its addresses are free,
 * the started process runs a detached copy of itself (its own session, stdio
 * on /dev/null), hands it the configuration files it checked, and returns to
 * its caller when that copy listens (exit 0) or failed (exit 1, the error on
 * stderr). The pid file holds the background process, as with nginx.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';

const ENV = 'GATEHOUSE_DAEMON_CHILD';

interface Handoff { snapshot: Record<string, string> }
interface Readiness { error?: string }

let isChild = false;

/** Whether this process is the background copy; clears the marker so workers and children do not see it. */
export function takeDaemonChild(): boolean {
  isChild = process.env[ENV] === '1' && typeof process.send === 'function';
  delete process.env[ENV];
  return isChild;
}

export function daemonize(argv: string[], snapshot: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...process.execArgv, process.argv[1], ...argv], {
      detached: true,
      stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
      env: { ...process.env, [ENV]: '1' },
    });
    let answered = false;
    child.once('message', (m: Readiness) => {
      answered = true;
      if (m.error) fs.writeSync(2, `gatehouse: [emerg] ${m.error}\n`);
      child.disconnect();
      child.unref();
      resolve(m.error ? 1 : 0);
    });
    child.once('exit', (code, signal) => {
      if (answered) return;
      fs.writeSync(2, `gatehouse: [emerg] the daemon process exited ${signal ? `on signal ${signal}` : `with code ${code}`} before it started\n`);
      resolve(1);
    });
    child.send({ snapshot } satisfies Handoff);
  });
}

/** In the background copy: the configuration files its parent checked. */
export function receiveSnapshot(): Promise<Record<string, string>> {
  // a parent gone before the hand-off leaves nothing to start
  const orphaned = () => process.exit(1);
  process.once('disconnect', orphaned);
  return new Promise((resolve) => process.once('message', (m: Handoff) => {
    process.off('disconnect', orphaned);
    resolve(m.snapshot);
  }));
}

let reported: Promise<void> = Promise.resolve();

/** Tells the waiting foreground process that we listen (or failed), then lets it go. */
export function reportDaemonReady(error?: string): void {
  if (!isChild) return;
  isChild = false;
  reported = new Promise((resolve) => process.send!({ error } satisfies Readiness, () => {
    process.disconnect();
    resolve();
  }));
}

/** Resolves once the report reached the parent (wait for it before exiting). */
export function daemonReportSent(): Promise<void> {
  return reported;
}

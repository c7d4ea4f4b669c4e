/**
 * Helpers for the limit_req / limit_conn tests: both servers on one config,
 * a backend that holds requests until told, `-t` runs, and error log lines
 * reduced to what must match between Gatehouse and nginx.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { parseResponse, rawRequest } from '../kit/client.ts';
import type { ParsedResponse } from '../kit/client.ts';
import { gatehouseBinary, nginxBinary, nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import type { RunningServer, StartOptions } from '../kit/server.ts';

/** Gatehouse, then Debian's nginx when installed, on the same options. */
export async function startBoth(t: TestContext, opts: StartOptions): Promise<RunningServer[]> {
  const gh = await startGatehouse(opts);
  t.after(() => gh.stop());
  if (nginxSkip) return [gh];
  const ng = await startNginx(opts);
  t.after(() => ng.stop());
  return [gh, ng];
}

/** GET `target` as HTTP/1.0 on the server's port 8080. */
export async function get(srv: RunningServer, target: string, port = 8080): Promise<ParsedResponse> {
  return parseResponse(await rawRequest(srv.port(port), `GET ${target} HTTP/1.0\r\nHost: localhost\r\n\r\n`));
}

/**
 * error.log lines matching `re`, without the time, pid and connection
 * number: `[error] limiting requests, … host: "localhost"`.
 */
export function logged(srv: RunningServer, re: RegExp): string[] {
  return srv.logLines().filter((l) => re.test(l)).map((l) => l.replace(/^\S+ \S+ (\[\w+\]) \d+#\d+: (\*\d+ )?/, '$1 '));
}

/** Waits until `file` has `n` lines (access log lines are written once the request is done). */
export async function waitLines(srv: RunningServer, file: string, n: number, timeoutMs = 5000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = srv.logLines(file);
    if (lines.length >= n) return lines;
    if (Date.now() > deadline) throw new Error(`${srv.flavor}: ${n} lines expected in ${file}, got ${lines.length}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The thread (nginx: process) ids of error.log lines matching `re`. */
export function loggedBy(srv: RunningServer, re: RegExp): Set<string> {
  const ids = new Set<string>();
  for (const l of srv.logLines()) if (re.test(l)) ids.add(/ (\d+#\d+): /.exec(l)?.[1] ?? '');
  return ids;
}

/** The `[emerg]` lines of `binary -t` on `conf` (nginx's and ours print the same text after the level). */
export function confTest(binary: string, conf: string): string[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-limit-t-'));
  try {
    fs.mkdirSync(path.join(dir, 'logs'));
    fs.writeFileSync(path.join(dir, 'nginx.conf'), conf);
    const res = spawnSync(binary, ['-t', '-p', `${dir}/`, '-c', 'nginx.conf', '-e', 'error.log',
      '-g', `pid ${dir}/nginx.pid; error_log ${dir}/error.log;`], { encoding: 'utf8', timeout: 20000 });
    return `${res.stdout}${res.stderr}`.split('\n').filter((l) => l.includes('[emerg]'))
      .map((l) => l.replace(/^.*\[emerg\] (\d+#\d+: )?/, '').replaceAll(dir, 'PREFIX'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export const binaries = (): Array<[string, string]> =>
  nginxSkip ? [['gatehouse', gatehouseBinary]] : [['gatehouse', gatehouseBinary], ['nginx', nginxBinary]];

/** An upstream that answers only when released: keeps requests in progress for limit_conn. */
export class HoldingBackend {
  readonly server: http.Server;
  port = 0;
  private held: http.ServerResponse[] = [];
  private arrivals: Array<() => void> = [];

  constructor() {
    this.server = http.createServer((req, res) => {
      req.resume();
      this.held.push(res);
      for (const f of this.arrivals.splice(0)) f();
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  /** Resolves once `n` requests are being held. */
  async waitHeld(n: number, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.held.filter((r) => !r.destroyed && !r.writableEnded).length < n) {
      if (Date.now() > deadline) throw new Error(`backend: ${n} held requests expected`);
      await new Promise<void>((resolve) => {
        this.arrivals.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  /** Answers every held request. */
  releaseAll(body = 'held\n'): void {
    for (const res of this.held.splice(0)) if (!res.destroyed) res.end(body);
  }

  async close(): Promise<void> {
    this.releaseAll();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

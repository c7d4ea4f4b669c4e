/**
 * Helpers for the tests of geo, split_clients, referer, empty_gif, realip
 * and autoindex: `nginx -t` on a configuration with both servers, compared.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { gatehouseBinary, nginxBinary, nginxSkip } from '../kit/server.ts';
import { normalize, runCli, tempDir } from '../cli/run-cli.ts';

export interface CheckResult {
  code: number | null;
  /** The [emerg]/[warn] lines, without time and pid, paths as DIR. */
  lines: string[];
}

async function check(binary: string, conf: string, files: Record<string, string>): Promise<CheckResult> {
  const t = tempDir();
  try {
    fs.writeFileSync(path.join(t.dir, 'nginx.conf'), conf);
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(t.dir, name), text);
    const r = await runCli(binary, ['-t', '-p', `${t.dir}/`, '-c', 'nginx.conf', '-e', 'stderr', '-g', `pid ${t.dir}/x.pid;`]);
    const lines = normalize(r.stderr, t.dir).split('\n').filter((l) => /^\[(emerg|warn|notice)\]/.test(l) && !/the configuration file|test is successful|test failed/.test(l));
    return { code: r.code, lines };
  } finally {
    t.cleanup();
  }
}

/**
 * Runs `-t` on `conf` with Gatehouse (and nginx, when installed) and asserts
 * they report the same lines and exit code; returns Gatehouse's result.
 */
export async function sameCheck(conf: string, files: Record<string, string> = {}): Promise<CheckResult> {
  const ours = await check(gatehouseBinary, conf, files);
  if (!nginxSkip) {
    const theirs = await check(nginxBinary, conf, files);
    assert.deepEqual(ours, theirs, `nginx -t agrees on:\n${conf}`);
  }
  return ours;
}

/** `events {} http { BODY }` with access_log off. */
export function httpConf(body: string): string {
  return `events {}\nhttp {\n    access_log off;\n${body}\n}\n`;
}

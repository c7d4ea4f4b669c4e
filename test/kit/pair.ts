// Gatehouse and (when installed) Debian's nginx started on the same
// configuration, for reference tests that compare what a client sees.
import fs from 'node:fs';
import { nginxSkip, startGatehouse, startNginx } from './server.ts';
import type { RunningServer, StartOptions } from './server.ts';

export interface Pair {
  gh: RunningServer;
  /** Undefined when Debian's nginx is not installed: tests then check Gatehouse alone. */
  ng: RunningServer | undefined;
}

/** One mtime for every file given, so ETag and Last-Modified agree between the servers. */
export const FIXED_MTIME = new Date('2024-05-06T07:08:09Z');

/** Starts both servers on `opts` (stopped after `t`) and gives `opts.files` the fixed mtime. */
export async function startPair(t: { after(fn: () => unknown): void }, opts: StartOptions): Promise<Pair> {
  const gh = await startGatehouse(opts);
  t.after(() => gh.stop());
  let ng: RunningServer | undefined;
  if (!nginxSkip) {
    ng = await startNginx(opts);
    t.after(() => ng!.stop());
  }
  for (const srv of [gh, ng]) {
    if (!srv) continue;
    for (const rel of Object.keys(opts.files ?? {})) fs.utimesSync(srv.path(rel), FIXED_MTIME, FIXED_MTIME);
  }
  return { gh, ng };
}

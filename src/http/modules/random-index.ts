/**
 * ngx_http_random_index_module: `random_index on` answers a URI ending in
 * `/` with a file of the directory picked at random (an internal redirect
 * to it): regular files, symbolic links to them included, whose names do
 * not start with a dot. A directory without one declines to the next
 * content handler (index, autoindex). Runs before index, as in nginx.
 */
import fs from 'node:fs';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import { sysErrorText } from '../../conf/errors.ts';
import { setting } from '../../conf/setters.ts';
import { flagArg } from '../../conf/values.ts';
import { mapUriToPath } from '../core/root.ts';
import { DECLINED } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import { internalRedirect } from '../phases.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';

const randomIndexSlot = defineSlot<{ enable?: boolean }, { enable: boolean }>('random_index', () => ({}), inheritUnset, { enable: false });

function randomIndexHandler(r: HttpRequest): number | Promise<number> {
  if (!r.uri.endsWith('/')) return DECLINED;
  const m = r.method;
  if (m !== 'GET' && m !== 'HEAD' && m !== 'POST') return DECLINED;
  if (!r.level.get(randomIndexSlot).enable) return DECLINED;
  return pickFile(r);
}

async function pickFile(r: HttpRequest): Promise<number> {
  let dir = mapUriToPath(r).path;
  if (dir.length > 1 && dir.endsWith('/')) dir = dir.slice(0, -1);
  let entries: fs.Dirent<Buffer>[];
  try {
    entries = await fs.promises.readdir(dir, { withFileTypes: true, encoding: 'buffer' });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const log = requestLog(r);
    if (e.code === 'ENOENT' || e.code === 'ENOTDIR' || e.code === 'ENAMETOOLONG') {
      log.error(`opendir() "${dir}" failed ${sysErrorText(e)}`);
      return 404;
    }
    if (e.code === 'EACCES') {
      log.error(`opendir() "${dir}" failed ${sysErrorText(e)}`);
      return 403;
    }
    log.crit(`opendir() "${dir}" failed ${sysErrorText(e)}`);
    return 500;
  }
  const names: Buffer[] = [];
  const prefix = Buffer.from(dir + '/');
  for (const e of entries) {
    if (e.name[0] === 0x2e) continue;
    let file = e.isFile();
    if (e.isSymbolicLink()) {
      // a link counts as what it points to
      try {
        file = (await fs.promises.stat(Buffer.concat([prefix, e.name]))).isFile();
      } catch {
        file = false;
      }
    }
    if (file) names.push(e.name);
  }
  if (names.length === 0) return DECLINED;
  const name = names[Math.floor(Math.random() * names.length)];
  return internalRedirect(r, r.uri + name.toString('latin1'), r.args);
}

export const randomIndexModule: HttpModule = {
  name: 'ngx_http_random_index_module',
  directives: [
    { name: 'random_index', contexts: Ctx.LOCATION, args: 'flag', handler: setting(randomIndexSlot, 'enable', flagArg) },
  ],
  postconfiguration(http) {
    // before index (100): nginx's module list has random_index after index, and each phase runs the last registered first
    http.addPhaseHandler('CONTENT', 50, randomIndexHandler);
  },
};

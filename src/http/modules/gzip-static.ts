/**
 * ngx_http_gzip_static_module: `gzip_static on | off | always`. For GET and
 * HEAD of a file, a precompressed `file.gz` beside it is sent instead, with
 * `Content-Encoding: gzip` and the original's type: with `on` when the
 * client may have gzip (the gzip module's checks: Accept-Encoding,
 * gzip_http_version, gzip_proxied, gzip_disable; `Vary: Accept-Encoding`
 * with gzip_vary once a .gz exists), with `always` to every client. Without
 * a .gz the static module answers as usual.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import { setting } from '../../conf/setters.ts';
import { enumOf } from '../../conf/values.ts';
import { sysErrorText } from '../../conf/errors.ts';
import { DECLINED } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { mapUriToPath } from '../core/root.ts';
import { gzipTested, gzipVaryOn, markGzipVary } from './gzip.ts';
import { symlinkRefusal } from '../core/disable-symlinks.ts';
import { openFile, sendFile } from './static.ts';
import type { OpenedFile } from './static.ts';

interface GzipStaticConf {
  mode?: 'off' | 'on' | 'always';
}

const gzipStaticSlot = defineSlot<GzipStaticConf, { mode: 'off' }>('gzip_static', () => ({}), inheritUnset, { mode: 'off' });

async function gzipStaticHandler(r: HttpRequest): Promise<number> {
  if (r.method !== 'GET' && r.method !== 'HEAD') return DECLINED;
  if (r.uri.endsWith('/')) return DECLINED;
  const { mode } = r.level.get(gzipStaticSlot);
  if (mode === 'off') return DECLINED;
  const ok = mode === 'always' || gzipTested(r);
  // without gzip_vary a client that cannot take gzip needs no look at the .gz at all
  if (!ok && !gzipVaryOn(r)) return DECLINED;
  const opened = await openPrecompressed(r, '.gz');
  if (opened === undefined) return DECLINED;
  if (mode === 'on') {
    // a .gz exists, so the answer depends on Accept-Encoding whichever way it goes
    markGzipVary(r);
    if (!ok) return opened.fh.close().catch(() => undefined).then(() => DECLINED);
  }
  return sendPrecompressed(r, opened, 'gzip');
}

type Opened = OpenedFile & { path: string };

/** The file of the URI with `suffix` (gzip_static's .gz, brotli_static's .br), open; undefined when there is none to send (errors logged as nginx logs them). */
export async function openPrecompressed(r: HttpRequest, suffix: string): Promise<Opened | undefined> {
  const path = mapUriToPath(r).path + suffix;
  const refusal = symlinkRefusal(r, path);
  const opened = (refusal && await refusal) || await openFile(path);
  if ('fh' in opened) return { ...opened, path };
  switch (opened.code) {
    case 'ENOENT': case 'ENOTDIR': case 'ENAMETOOLONG':
      return undefined;
    case 'EACCES': case 'EMLINK': case 'ELOOP':
      requestLog(r).error(`open() "${path}" failed ${sysErrorText(opened)}`);
      return undefined;
    default:
      requestLog(r).crit(`open() "${path}" failed ${sysErrorText(opened)}`);
      return undefined;
  }
}

/** gzip_static's and brotli_static's answer: the opened file with `encoding` (in byte ranges if `ranges`); DECLINED for a directory. */
export async function sendPrecompressed(r: HttpRequest, opened: Opened, encoding: string, ranges = true): Promise<number> {
  if (opened.stat.isDirectory() || !opened.stat.isFile()) {
    await opened.fh.close().catch(() => undefined);
    if (opened.stat.isDirectory()) return DECLINED;
    requestLog(r).crit(`"${opened.path}" is not a regular file`);
    return 404;
  }
  return sendFile(r, opened, encoding, ranges);
}

export const gzipStaticModule: HttpModule = {
  name: 'ngx_http_gzip_static_module',
  directives: [
    { name: 'gzip_static', contexts: HTTP_ANY, args: 1, handler: setting(gzipStaticSlot, 'mode', enumOf(['off', 'on', 'always'])) },
  ],
  postconfiguration(http) {
    // nginx's content handlers run index 100, autoindex 200, (dav), gzip_static, static 300
    http.addPhaseHandler('CONTENT', 250, gzipStaticHandler);
  },
};

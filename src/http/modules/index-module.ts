/**
 * ngx_http_index_module: for a URI ending in `/`, the first `index` file
 * that exists is served through an internal redirect; an absolute index is
 * redirected to without testing. Without an index, the content phase ends
 * in 403 ("directory index of ... is forbidden"); a missing directory is 404.
 */
import fs from 'node:fs';
import { defineSlot } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import { sysErrorText } from '../../conf/errors.ts';
import { mainErrorLog } from '../../core/error-log.ts';
import { DECLINED, httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import { internalRedirect } from '../phases.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { mapUriToPath } from '../core/root.ts';
import { symlinkRefusal } from '../core/disable-symlinks.ts';
import { coreLoc } from '../core/settings.ts';

interface IndexConf {
  indices?: ComplexValue[];
}

const DEFAULT_INDEX: ComplexValue[] = [{ constant: 'index.html', source: 'index.html', evaluate: () => 'index.html' }];

const indexSlot = defineSlot<IndexConf>('index', () => ({}), (parent, child) => {
  child.indices ??= parent.indices;
});

/** stat(2) that returns the error instead of throwing. */
async function statPath(path: string): Promise<fs.Stats | NodeJS.ErrnoException> {
  try {
    return await fs.promises.stat(path);
  } catch (err) {
    return err as NodeJS.ErrnoException;
  }
}

/** ngx_http_index_error: 403 for EACCES, else 404 (logged unless log_not_found is off). */
function indexError(r: HttpRequest, file: string, err: NodeJS.ErrnoException): number {
  if (err.code === 'EACCES') {
    requestLog(r).error(`"${file}" is forbidden ${sysErrorText(err)}`);
    return 403;
  }
  if (r.level.get(coreLoc).logNotFound ?? true) requestLog(r).error(`"${file}" is not found ${sysErrorText(err)}`);
  return 404;
}

/**
 * Checks the directory itself once an index file is missing
 * (ngx_http_index_test_dir); nginx names the index file in its messages.
 */
async function testDir(r: HttpRequest, dir: string, file: string): Promise<number> {
  const st = await statPath(dir);
  if (!(st instanceof fs.Stats)) {
    if (st.code === 'ENOENT') return indexError(r, file, st);
    if (st.code === 'EACCES') return DECLINED;
    requestLog(r).crit(`stat() "${dir}" failed ${sysErrorText(st)}`);
    return 500;
  }
  if (st.isDirectory()) return DECLINED;
  requestLog(r).alert(`"${dir}" is not a directory`);
  return 500;
}

/** Declines synchronously for what is not a directory request (most requests). */
function indexHandler(r: HttpRequest): number | Promise<number> {
  if (!r.uri.endsWith('/')) return DECLINED;
  const m = r.method;
  if (m !== 'GET' && m !== 'HEAD' && m !== 'POST') return DECLINED;
  return tryIndexFiles(r);
}

async function tryIndexFiles(r: HttpRequest): Promise<number> {
  const indices = r.level.get(indexSlot).indices ?? DEFAULT_INDEX;
  let dirTested = false;
  let base: string | undefined;
  for (const index of indices) {
    const name = index.evaluate(r);
    if (name[0] === '/') return internalRedirect(r, name, r.args);
    base ??= mapUriToPath(r).path;
    const path = base + name;
    const refusal = symlinkRefusal(r, path);
    const st = (refusal && await refusal) || await statPath(path);
    if (st instanceof fs.Stats) {
      // the index URI is the request URI plus the name, with alias as well as root
      return internalRedirect(r, r.uri + name, r.args);
    }
    if (st.code === 'ELOOP' || st.code === 'EMLINK') return 403;
    if (st.code === 'ENOTDIR' || st.code === 'ENAMETOOLONG' || st.code === 'EACCES') return indexError(r, path, st);
    if (!dirTested) {
      const rc = await testDir(r, base.length > 1 && base.endsWith('/') ? base.slice(0, -1) : base, path);
      if (rc !== DECLINED) return rc;
      dirTested = true;
    }
    if (st.code === 'ENOENT') continue;
    requestLog(r).crit(`stat() "${path}" failed ${sysErrorText(st)}`);
    return 500;
  }
  return DECLINED;
}

export const indexModule: HttpModule = {
  name: 'ngx_http_index_module',
  directives: [
    {
      name: 'index', contexts: HTTP_ANY, args: [1, Infinity],
      handler(cf, node) {
        const c = cf.get(indexSlot);
        if (!Object.hasOwn(c, 'indices') || c.indices === undefined) c.indices = [];
        const vars = httpMainOf(cf).variables;
        node.args.forEach((name, i) => {
          if (name === '') throw cf.error(`index "${node.args[0]}" in "index" directive is invalid`);
          if (name[0] === '/' && i !== node.args.length - 1) {
            mainErrorLog().warn(`only the last index in "index" directive should be absolute in ${node.file}:${node.line}`);
          }
          c.indices!.push(compileComplex(cf, vars, name));
        });
      },
    },
  ],
  postconfiguration(http) {
    // runs before the static module's handler, as nginx orders its content handlers
    // nginx's content phase runs index, autoindex, static (the reverse of its module list)
    http.addPhaseHandler('CONTENT', 100, indexHandler);
  },
};

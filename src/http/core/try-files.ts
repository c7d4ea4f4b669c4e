/**
 * ngx_http_try_files_module: `try_files file ... uri|=code` in the
 * precontent phase. Each candidate (a trailing `/` tests for a directory) is
 * mapped through root/alias and stat'ed; the first that exists becomes the
 * URI for the content phase in the same location. Otherwise the last
 * argument is an internal redirect, a named location, or a status.
 */
import fs from 'node:fs';
import { defineSlot } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import { sysErrorText } from '../../conf/errors.ts';
import { DECLINED, DONE, httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import { internalRedirect, namedLocation } from '../phases.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { unique } from '../../conf/setters.ts';
import { failedCall, symlinkRefusal } from './disable-symlinks.ts';
import { ADD_URI_TO_ALIAS, aliasLength, documentRoot } from './root.ts';

interface TryFile {
  value: ComplexValue;
  testDir: boolean;
}

interface TryFilesConf {
  files?: TryFile[];
  /** The last argument: a URI or `@name` to go to. */
  fallback?: ComplexValue;
  /** The last argument as `=code`. */
  code?: number;
}

/** Not inherited: a location without try_files has none (nginx has no merge for it). */
const tryFilesSlot = defineSlot<TryFilesConf>('try_files', () => ({}));

async function statPath(path: string): Promise<fs.Stats | NodeJS.ErrnoException> {
  try {
    return await fs.promises.stat(path);
  } catch (err) {
    return err as NodeJS.ErrnoException;
  }
}

/** Declines synchronously where there is no try_files (every request passes here). */
function tryFilesHandler(r: HttpRequest): number | Promise<number> {
  if (!r.level.has(tryFilesSlot)) return DECLINED;
  const conf = r.level.get(tryFilesSlot);
  if (!conf.files) return DECLINED;
  return tryFiles(r, conf, conf.files);
}

async function tryFiles(r: HttpRequest, conf: TryFilesConf, files: TryFile[]): Promise<number> {
  const alias = aliasLength(r);
  const root = documentRoot(r);
  for (const tf of files) {
    let name = tf.value.evaluate(r);
    // with alias, a name that repeats the location prefix (as $uri does) drops it
    if (tf.value.constant === undefined && alias > 0 && name.startsWith(r.uri.slice(0, alias))) {
      name = name.slice(alias);
    }
    const path = root + name;
    const refusal = symlinkRefusal(r, path);
    const st = (refusal && await refusal) || await statPath(path);
    if (!(st instanceof fs.Stats)) {
      if (st.code !== 'ENOENT' && st.code !== 'ENOTDIR' && st.code !== 'ENAMETOOLONG') {
        requestLog(r).crit(`${failedCall(st, 'stat()')} "${path}" failed ${sysErrorText(st)}`);
      }
      continue;
    }
    if (st.isDirectory() !== tf.testDir) continue;
    if (alias === 0) r.uri = name;
    else if (alias < 0) {
      if (!tf.testDir) {
        r.uri = name;
        r.ctx.set(ADD_URI_TO_ALIAS, true);
      }
    } else {
      r.uri = r.uri.slice(0, alias) + name;
    }
    return DECLINED;
  }
  if (conf.code !== undefined) return conf.code;
  const target = conf.fallback!.evaluate(r);
  if (target[0] === '@') await namedLocation(r, target);
  else {
    const q = target.indexOf('?');
    await internalRedirect(r, q >= 0 ? target.slice(0, q) : target, q >= 0 ? target.slice(q + 1) : '');
  }
  return DONE;
}

export const tryFilesModule: HttpModule = {
  name: 'ngx_http_try_files_module',
  directives: [
    {
      name: 'try_files', contexts: Ctx.SERVER | Ctx.LOCATION, args: [2, Infinity],
      handler: unique(tryFilesSlot, 'files', (cf, node, c) => {
        const vars = httpMainOf(cf).variables;
        const args = node.args;
        const last = args[args.length - 1];
        c.files = args.slice(0, -1).map((raw) => {
          const testDir = raw.length > 0 && raw.endsWith('/');
          return { value: compileComplex(cf, vars, testDir ? raw.slice(0, -1) : raw), testDir };
        });
        if (last[0] === '=') {
          const code = /^\d+$/.test(last.slice(1)) ? Number(last.slice(1)) : NaN;
          if (Number.isNaN(code) || code > 999) throw cf.error(`invalid code "${last}"`);
          c.code = code;
        } else {
          c.fallback = compileComplex(cf, vars, last);
        }
        return undefined;
      }),
    },
  ],
  postconfiguration(http) {
    // nginx's precontent phase: try_files 100 (mirror would be 200)
    http.addPhaseHandler('PRECONTENT', 100, tryFilesHandler);
  },
};

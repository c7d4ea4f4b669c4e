/**
 * disable_symlinks (ngx_http_core_module; nginx opens a file component by
 * component with O_NOFOLLOW, ngx_open_file_wrapper): `on` refuses a path
 * with a symbolic link in it, `if_not_owner` one whose link and target have
 * different owners, both after the `from=` part when the path starts with
 * it. Refused is nginx's ELOOP: 403 for the static module, "not found" for
 * try_files and the `-f`-style tests of `if`. Here each component is looked
 * at with lstat before the file is opened.
 */
import fs from 'node:fs';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { unique } from '../../conf/setters.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';

interface SymlinksConf {
  mode?: 'off' | 'on' | 'if_not_owner';
  /** null: none (set so, not inherited). */
  from?: ComplexValue | null;
}

const symlinksSlot = defineSlot<SymlinksConf, { mode: 'off' }>('disable_symlinks', () => ({}), inheritUnset, { mode: 'off' });

export const disableSymlinksDirective: Directive = {
  name: 'disable_symlinks', contexts: HTTP_ANY, args: [1, 2],
  handler: unique(symlinksSlot, 'mode', (cf, node, c) => {
    const a = node.args;
    let from: ComplexValue | null | undefined;
    for (const v of a) {
      if (v === 'off' || v === 'on' || v === 'if_not_owner') c.mode = v;
      else if (v.startsWith('from=')) from = compileComplex(cf, httpMainOf(cf).variables, v.slice(5));
      else throw cf.error(`invalid parameter "${v}"`);
    }
    if (c.mode === undefined) throw cf.error(`"${node.name}" must have "off", "on" or "if_not_owner" parameter`);
    // one argument: explicitly no from= (it is not inherited then)
    if (a.length === 1) from = null;
    else if (from === undefined) throw cf.error(`duplicate parameters "${a[0]} ${a[1]}"`);
    else if (c.mode === 'off') throw cf.error('"from=" cannot be used with "off" parameter');
    c.from = from;
  }),
};

/**
 * What nginx's openat() with O_NOFOLLOW says: ELOOP for the file itself, ENOTDIR
 * for a directory on the way (opened with O_DIRECTORY too).
 */
function refused(path: string, last: boolean): NodeJS.ErrnoException {
  const [code, errno] = last ? ['ELOOP', -40] : ['ENOTDIR', -20];
  return Object.assign(new Error(`${code}: symbolic link refused, open '${path}'`), { code, errno, syscall: 'openat', path });
}

/** The call nginx names in its log line: `openat()` for a refused link, else `dflt` (open(), stat()). */
export function failedCall(err: NodeJS.ErrnoException, dflt: string): string {
  return err.syscall === 'openat' ? 'openat()' : dflt;
}

/** Where checking starts (ngx_http_set_disable_symlinks' `from`): -1 when the whole path is exempt. */
function startOf(r: HttpRequest, from: ComplexValue | null | undefined, path: string): number {
  if (!from) return 0;
  const f = from.evaluate(r);
  if (f === '' || f.length > path.length || !path.startsWith(f)) return 0;
  if (f.length === path.length) return -1;
  if (path[f.length] === '/') return f.length;
  return path[f.length - 1] === '/' ? f.length - 1 : 0;
}

/**
 * The error opening `path` meets under the location's disable_symlinks, or
 * undefined (then nothing is asked of the file system; a missing component
 * is left to the open that follows). Synchronous undefined when off.
 */
export function symlinkRefusal(r: HttpRequest, path: string): Promise<NodeJS.ErrnoException | undefined> | undefined {
  const conf = r.level.get(symlinksSlot);
  if (conf.mode === 'off') return undefined;
  const start = startOf(r, conf.from, path);
  if (start < 0) return undefined;
  return walk(path, start, conf.mode === 'on');
}

async function walk(path: string, start: number, any: boolean): Promise<NodeJS.ErrnoException | undefined> {
  const name = Buffer.from(path, 'latin1');
  let at = path.indexOf('/', start);
  while (at >= 0 && at < path.length) {
    const next = path.indexOf('/', at + 1);
    const end = next < 0 ? path.length : next;
    if (end > at + 1) {
      const part = name.subarray(0, end);
      let link: fs.Stats;
      try {
        link = await fs.promises.lstat(part);
      } catch {
        return undefined;
      }
      if (link.isSymbolicLink()) {
        const last = !/[^/]/.test(path.slice(end));
        if (any) return refused(path, last);
        try {
          if ((await fs.promises.stat(part)).uid !== link.uid) return refused(path, true);
        } catch {
          return undefined;
        }
      }
    }
    at = next;
  }
  return undefined;
}

/**
 * `root` and `alias` as configured: what a level holds and how its argument
 * is compiled (ngx_http_core_root). Below the core settings that store it
 * and root.ts, which maps URIs with it at run time.
 */
import type { ConfContext } from '../../conf/context.ts';
import { httpMainOf } from '../http-conf.ts';
import type { LocationConf } from '../http-conf.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';

/** A level's `root` or `alias` (a level has one or the other; they inherit together). */
export interface DocRoot {
  /** A value without variables is already resolved against the prefix. */
  value: ComplexValue;
  isAlias: boolean;
  /**
   * For `alias`: how many leading URI bytes it replaces (the location's
   * name), or -1 in a regex location, where the alias is the whole path.
   */
  aliasLength: number;
  /** Has variables: a relative result is resolved against the prefix per request. */
  dynamic: boolean;
}

/** Parses the argument of `root`/`alias` (ngx_http_core_root). */
export function compileDocRoot(cf: ConfContext, text: string, isAlias: boolean): DocRoot {
  const name = isAlias ? 'alias' : 'root';
  const loc = cf.data.location as LocationConf | undefined;
  if (isAlias && loc?.match === 'named') throw cf.error('the "alias" directive cannot be used inside the named location');
  for (const v of ['document_root', 'realpath_root']) {
    if (text.includes(`$${v}`) || text.includes(`\${${v}}`)) {
      throw cf.error(`the $${v} variable cannot be used in the "${name}" directive`);
    }
  }
  let value = text;
  if (!isAlias && value.length > 0 && value.endsWith('/')) value = value.slice(0, -1);
  const dynamic = value.includes('$');
  // nginx's ngx_conf_full_name: a plain concatenation, so `alias dir/;` keeps its slash
  if (!value.startsWith('$') && !value.startsWith('/')) value = cf.paths.prefix + value;
  const regexAlias = isAlias && loc?.match === 'regex';
  return {
    value: compileComplex(cf, httpMainOf(cf).variables, value),
    isAlias,
    aliasLength: isAlias ? (regexAlias ? -1 : (loc?.path.length ?? 0)) : 0,
    dynamic,
  };
}

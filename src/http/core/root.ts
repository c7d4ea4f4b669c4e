/**
 * `root` and `alias`: compiling them, and mapping a URI to a file path as
 * ngx_http_map_uri_to_path does; `$document_root`, `$realpath_root` and
 * `$request_filename`.
 */
import fs from 'node:fs';
import type { ConfContext } from '../../conf/context.ts';
import type { Cycle } from '../../core/cycle.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpMainConf, HttpVariable, LocationConf } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { coreLoc } from './settings.ts';
import { httpConf } from './structure.ts';

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

/** The prefix of each loaded http block, for the default root and relative roots with variables. */
const prefixes = new WeakMap<HttpMainConf, string>();

/** Remembers the cycle's prefix (installed as a module's initCycle). */
export function rememberPrefix(cycle: Cycle): void {
  const http = httpConf(cycle);
  if (http) prefixes.set(http, cycle.paths.prefix);
}

function prefixOf(r: HttpRequest): string {
  return prefixes.get(r.main) ?? '';
}

/** Set by try_files in a regex location with `alias`: the URI is appended to the alias. */
export const ADD_URI_TO_ALIAS = {};

/** `$document_root`: root or alias, evaluated, made absolute. */
export function documentRoot(r: HttpRequest): string {
  const dr = r.level.get(coreLoc).root;
  if (!dr) return prefixOf(r) + 'html';
  const v = dr.value.evaluate(r);
  return dr.dynamic && v[0] !== '/' ? prefixOf(r) + v : v;
}

export interface MappedPath {
  path: string;
  /** Length of the root part of `path` (nginx's root_length). */
  rootLength: number;
}

/** The file path for `uri` at the request's location (ngx_http_map_uri_to_path). */
export function mapUriToPath(r: HttpRequest, uri = r.uri): MappedPath {
  const dr = r.level.get(coreLoc).root;
  const root = documentRoot(r);
  if (!dr || !dr.isAlias) return { path: root + uri, rootLength: root.length };
  if (dr.aliasLength < 0) {
    return r.ctx.has(ADD_URI_TO_ALIAS) ? { path: root + uri, rootLength: root.length } : { path: root, rootLength: root.length };
  }
  return { path: root + uri.slice(dr.aliasLength), rootLength: root.length };
}

/** How much of the URI an alias replaces: 0 for root, -1 for a regex location's alias. */
export function aliasLength(r: HttpRequest): number {
  const dr = r.level.get(coreLoc).root;
  return dr?.isAlias ? dr.aliasLength : 0;
}

export const rootVariables: HttpVariable[] = [
  { name: 'document_root', noCache: true, get: (r) => documentRoot(r) },
  {
    name: 'realpath_root', noCache: true,
    get(r) {
      try {
        return fs.realpathSync.native(documentRoot(r));
      } catch {
        return undefined;
      }
    },
  },
  { name: 'request_filename', noCache: true, get: (r) => mapUriToPath(r).path },
];

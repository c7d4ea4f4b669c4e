/**
 * `root` and `alias` at run time (compiled in doc-root.ts): mapping a URI to a
 * file path as ngx_http_map_uri_to_path does; `$document_root`, `$realpath_root` and
 * `$request_filename`.
 */
import fs from 'node:fs';
import type { Cycle } from '../../core/cycle.ts';
import type { HttpMainConf, HttpVariable } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { coreLoc } from './settings.ts';
import { httpConf } from '../http-conf.ts';

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

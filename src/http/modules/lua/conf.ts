/**
 * The configuration of ngx_http_lua_module: where each hook's Lua comes from
 * (inline string, `_block` body, or file) under the chunk name OpenResty
 * gives it, and the http-level settings (package paths, shared dicts,
 * init hooks).
 */
import path from 'node:path';
import { defineSlot, inheritUnset } from '../../../conf/context.ts';
import type { ConfContext } from '../../../conf/context.ts';
import type { ConfNode } from '../../../conf/parser.ts';
import { compileComplex } from '../../../core/variables.ts';
import type { ComplexValue } from '../../../core/variables.ts';
import { httpMainOf } from '../../http-conf.ts';
import type { HttpRequest } from '../../request.ts';

/** One hook's Lua: compiled once per worker VM (lua_code_cache on). */
export interface LuaHook {
  /** `content_by_lua`, `rewrite_by_lua`, ... (the directive without `_block`/`_file`). */
  readonly kind: string;
  /** Inline source, or undefined for a file. */
  readonly source: string | undefined;
  /** The file of a `*_by_lua_file` (relative to the prefix, as OpenResty resolves it). */
  readonly file: string | undefined;
  /** A request hook's file path with variables: evaluated per request, then resolved as `file` is. */
  readonly filePath?: ComplexValue<HttpRequest>;
  /** OpenResty's chunk name: `content_by_lua(nginx.conf:40)`, or the file's path. */
  readonly name: string;
}

export interface LuaLocConf {
  /** lua_need_request_body: the body is read before the rewrite, access and content hooks. */
  needBody?: boolean;
  /** lua_transform_underscores_in_response_headers (default on). */
  transformUnderscores?: boolean;
  /** lua_check_client_abort (default off): ngx.on_abort works. */
  checkClientAbort?: boolean;
  /** lua_use_default_type (default on). */
  useDefaultType?: boolean;
  /** lua_http10_buffering (default on): an HTTP/1.0 response is held whole and gets a Content-Length. */
  http10Buffering?: boolean;
  rewrite?: LuaHook;
  access?: LuaHook;
  content?: LuaHook;
  log?: LuaHook;
  headerFilter?: LuaHook;
  bodyFilter?: LuaHook;
}

export const luaLoc = defineSlot<LuaLocConf>('lua', () => ({}), inheritUnset);

export interface LuaMainConf {
  packagePath?: string;
  packageCpath?: string;
  codeCache?: boolean;
  init?: LuaHook;
  initWorker?: LuaHook;
  exitWorker?: LuaHook;
  /** `lua_shared_dict name size`: sizes in bytes, by name. */
  sharedDicts: Map<string, number>;
  /** Set when any Lua directive appears: workers then create a VM. */
  used: boolean;
  maxPendingTimers?: number;
  maxRunningTimers?: number;
  /** lua_thread_cache_max_entries (OpenResty's default 1024). */
  threadCacheMax?: number;
  rewriteNoPostpone?: boolean;
  accessNoPostpone?: boolean;
}

export const luaMain = defineSlot<LuaMainConf>('lua_main', () => ({ sharedDicts: new Map(), used: false }));

/**
 * The hook a `*_by_lua`, `*_by_lua_block` or `*_by_lua_file` directive names.
 * Inline chunks are named after the directive and where it is, as OpenResty
 * names them: `content_by_lua(nginx.conf:40)`; a file keeps its own path.
 */
export function readHook(cf: ConfContext, node: ConfNode, arg = node.args.length - 1): LuaHook {
  const name = node.name;
  const kind = name.replace(/_(block|file)$/, '');
  const at = `${kind}(${chunkPlace(cf.paths.confPrefix, node.file, kind.length + String(node.line).length)}:${node.line})`;
  if (name.endsWith('_file')) {
    const given = node.args[arg];
    const file = path.resolve(cf.paths.prefix, given);
    // OpenResty allows variables in a request hook's file path (init hooks have no request)
    if (given.includes('$') && !kind.startsWith('init')) {
      return { kind, source: undefined, file, name: file, filePath: compileComplex(cf, httpMainOf(cf).variables, given) };
    }
    return { kind, source: undefined, file, name: file };
  }
  return { kind, source: node.args[arg], file: undefined, name: at };
}

/** LuaJIT's limit on a chunk name, as ngx_http_lua_gen_chunk_name keeps to it. */
const CHUNK_NAME_MAX = 56;

/**
 * The file part of an inline chunk's name, as OpenResty writes it: `nginx.conf`, a path relative
 * to the configuration's directory for a file under it, else the whole path; a long one keeps its
 * end after `...`. `reserve` is the length of the hook's name and the line number.
 */
function chunkPlace(confPrefix: string, file: string, reserve: number): string {
  if (file.endsWith('/nginx.conf')) return 'nginx.conf';
  const under = file.length > confPrefix.length && file.startsWith(confPrefix);
  const name = under ? file.slice(confPrefix.length) : file;
  if (name.length + reserve <= CHUNK_NAME_MAX) return name;
  return '...' + file.slice(file.length - CHUNK_NAME_MAX + reserve + 3);
}

/**
 * `lua_package_path`: `;;` stands for the default path and `$prefix` (or
 * `${prefix}`) for the server's prefix, as in OpenResty.
 */
export function expandPackagePath(value: string, defaults: string, prefix: string): string {
  return value.replace(/\$\{prefix\}|\$prefix/g, () => prefix).replace(';;', `;${defaults};`).replace(/^;+|;+$/g, '');
}

/**
 * ngx_http_dav_module: PUT, DELETE, MKCOL, COPY and MOVE on the files under
 * the location's root or alias, with nginx's statuses, checks and error
 * log lines. PUT reads the body into a temporary file (client_body_temp_path)
 * and renames it into place; the tree operations are in dav-tree.ts. File
 * system calls are synchronous, as nginx's are.
 */
import fs from 'node:fs';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { sysErrorText } from '../../conf/errors.ts';
import { setting, unique } from '../../conf/setters.ts';
import { bitmaskArgs, flagArg, numberArg } from '../../conf/values.ts';
import { parseHttpTime } from '../../core/http-time.ts';
import { aliasLength, mapUriToPath } from '../core/root.ts';
import { coreLoc } from '../core/settings.ts';
import { DECLINED, DONE } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { createTempFile, defaultTempPath, hasRequestBody, readRequestBody } from '../request-body.ts';
import { requestLog } from '../request-log.ts';
import { endBody, sendHeader } from '../response.ts';
import { parseUnsafeUri } from '../subrequest.ts';
import { escapeUri } from '../uri.ts';
import { parseAccess } from '../upstream/store.ts';
import { copyFile, copyTree, davError, deletePath, dirAccess, fsPath, renameFile } from './dav-tree.ts';

const METHODS = ['off', 'put', 'delete', 'mkcol', 'copy', 'move'] as const;

interface DavConf {
  /** Upper-case method names dav_methods allows. */
  methods?: Set<string>;
  access?: number;
  minDeleteDepth?: number;
  createFullPutPath?: boolean;
}

const DAV_DEFAULTS = { methods: new Set<string>(), access: 0o600, minDeleteDepth: 0, createFullPutPath: false } satisfies DavConf;

const davSlot = defineSlot<DavConf, typeof DAV_DEFAULTS>('dav', () => ({}), inheritUnset, DAV_DEFAULTS);

const INFINITY = -1;
const INVALID = -2;

/** The Depth header: 0, 1, infinity, `dflt` when absent, INVALID otherwise (logged). */
function depthOf(r: HttpRequest, dflt: number): number {
  const v = r.header('depth');
  if (v === undefined) return dflt;
  if (v === '0') return 0;
  if (v === '1') return 1;
  if (v === 'infinity') return INFINITY;
  requestLog(r).error(`client sent invalid "Depth" header: "${v}"`);
  return INVALID;
}

/** nginx answers 201 with an empty body and, for what it made at the request's URI, a Location. */
async function created(r: HttpRequest): Promise<number> {
  r.status = 201;
  r.location = escapeUri(r.uri);
  r.contentLength = 0;
  await sendHeader(r);
  endBody(r);
  return DONE;
}

async function davHandler(r: HttpRequest): Promise<number> {
  const conf = r.level.get(davSlot);
  if (!conf.methods.has(r.method)) return DECLINED;
  switch (r.method) {
    case 'PUT': return put(r);
    case 'DELETE': return remove(r);
    case 'MKCOL': return mkcol(r);
    default: return copyMove(r);
  }
}

async function put(r: HttpRequest): Promise<number> {
  const log = requestLog(r);
  if (r.uri.endsWith('/')) {
    log.error('cannot PUT to a collection');
    return 409;
  }
  if (r.header('content-range') !== undefined) {
    log.error('PUT with range is unsupported');
    return 501;
  }
  const body = await readRequestBody(r);
  if (typeof body === 'number') return body;
  let temp = body.file;
  if (temp === undefined) {
    // a body read into memory goes to a file of its own, as nginx's PUT always has one
    const core = r.level.get(coreLoc);
    try {
      const t = createTempFile(core.clientBodyTempPath ?? defaultTempPath('client_body_temp'));
      for (const b of body.bufs) fs.writeSync(t.fd, b);
      fs.closeSync(t.fd);
      temp = t.path;
    } catch (err) {
      log.crit(`write() to a temporary file failed ${sysErrorText(err)}`);
      return 500;
    }
  }
  const target = mapUriToPath(r).path;
  let status = 201;
  try {
    if (fs.statSync(fsPath(target)).isDirectory()) {
      log.error(`"${target}" could not be created (21: Is a directory)`);
      fs.rmSync(fsPath(temp), { force: true });
      return 409;
    }
    status = 204;
  } catch { /* not there: created */ }
  const conf = r.level.get(davSlot);
  const date = r.header('date');
  const time = date === undefined ? -1 : parseHttpTime(date);
  if (!renameFile(r, temp, target, { access: conf.access, pathAccess: conf.access, time, createPath: conf.createFullPutPath, deleteFile: true })) return 500;
  if (status === 201) return created(r);
  return 204;
}

function remove(r: HttpRequest): number {
  const log = requestLog(r);
  if (hasRequestBody(r)) {
    log.error('DELETE with body is unsupported');
    return 415;
  }
  const min = r.level.get(davSlot).minDeleteDepth;
  if (min) {
    let d = 0;
    let deep = false;
    for (let i = 0; i < r.uri.length && !deep;) {
      if (r.uri[i++] === '/' && ++d >= min && i < r.uri.length) deep = true;
    }
    if (!deep) {
      log.error(`insufficient URI depth:${d} to DELETE`);
      return 409;
    }
  }
  let target = mapUriToPath(r).path;
  let st: fs.Stats;
  try {
    st = fs.lstatSync(fsPath(target));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return davError(r, err, code === 'ENOTDIR' ? 409 : 404, 'lstat()', target);
  }
  let dir = false;
  if (st.isDirectory()) {
    if (!r.uri.endsWith('/')) {
      log.error(`DELETE "${target}" failed (21: Is a directory)`);
      return 409;
    }
    if (depthOf(r, INFINITY) !== INFINITY) {
      log.error('"Depth" header must be infinity');
      return 400;
    }
    target = target.slice(0, -1);
    dir = true;
  } else {
    const depth = depthOf(r, 0);
    if (depth !== 0 && depth !== INFINITY) {
      log.error('"Depth" header must be 0 or infinity');
      return 400;
    }
  }
  const rc = deletePath(r, target, dir);
  return rc === 0 ? 204 : rc;
}

async function mkcol(r: HttpRequest): Promise<number> {
  const log = requestLog(r);
  if (hasRequestBody(r)) {
    log.error('MKCOL with body is unsupported');
    return 415;
  }
  if (!r.uri.endsWith('/')) {
    log.error('MKCOL can create a collection only');
    return 409;
  }
  const target = mapUriToPath(r).path.slice(0, -1);
  try {
    fs.mkdirSync(fsPath(target), { mode: dirAccess(r.level.get(davSlot).access) });
  } catch (err) {
    return davError(r, err, 409, 'mkdir()', target);
  }
  return created(r);
}

/** The Destination header's path, or a status. */
function destinationOf(r: HttpRequest): { uri: string; raw: string } | number {
  const log = requestLog(r);
  const dest = r.header('destination');
  if (dest === undefined) {
    log.error('client sent no "Destination" header');
    return 400;
  }
  const invalid = () => {
    log.error(`client sent invalid "Destination" header: "${dest}"`);
    return 400;
  };
  let from = 0;
  if (dest[0] !== '/') {
    if (!r.host) {
      log.error('client sent no "Host" header');
      return 400;
    }
    const scheme = r.conn.tls ? 'https://' : 'http://';
    if (!dest.startsWith(scheme)) return invalid();
    const host = scheme.length;
    if (!dest.startsWith(r.host, host)) {
      log.error(`"Destination" URI "${dest}" is handled by different repository than the source URI`);
      return 400;
    }
    from = dest.indexOf('/', host + r.host.length);
    if (from < 0) return invalid();
  }
  const parsed = parseUnsafeUri(r, dest.slice(from));
  if (parsed === undefined) return invalid();
  return { uri: parsed.uri, raw: dest };
}

/** nginx's ngx_http_dav_merge_slashes. */
const mergeSlashes = (p: string) => p.replace(/\/{2,}/g, '/');

function copyMove(r: HttpRequest): number {
  const log = requestLog(r);
  if (hasRequestBody(r)) {
    log.error('COPY and MOVE with body are unsupported');
    return 415;
  }
  const dest = destinationOf(r);
  if (typeof dest === 'number') return dest;
  if (r.uri.endsWith('/') !== dest.raw.endsWith('/')) {
    log.error(`both URI "${r.uri}" and "Destination" URI "${dest.raw}" should be either collections or non-collections`);
    return 409;
  }
  const alias = aliasLength(r);
  if (alias > 0 && dest.uri.length < alias) {
    log.error(`client sent invalid "Destination" header: "${dest.raw}"`);
    return 400;
  }
  const depth = depthOf(r, INFINITY);
  if (depth !== INFINITY && (r.method !== 'COPY' || depth !== 0)) {
    log.error(r.method === 'COPY' ? '"Depth" header must be 0 or infinity' : '"Depth" header must be infinity');
    return 400;
  }
  let overwrite = true;
  const over = r.header('overwrite');
  if (over !== undefined) {
    if (over === 'T' || over === 't') overwrite = true;
    else if (over === 'F' || over === 'f') overwrite = false;
    else {
      log.error(`client sent invalid "Overwrite" header: "${over}"`);
      return 400;
    }
  }
  let src = mergeSlashes(mapUriToPath(r).path);
  let dst = mergeSlashes(mapUriToPath(r, dest.uri).path);
  const slash = dst.endsWith('/');
  if (slash) dst = dst.slice(0, -1);
  const srcLen = src.length > 0 && src.endsWith('/') ? src.length - 1 : src.length;
  if (srcLen === dst.length && src.startsWith(dst)) {
    log.error(`both URI "${r.uri}" and "Destination" URI "${dest.raw}" point to the same location`);
    return 403;
  }
  const common = Math.min(srcLen, dst.length);
  if (slash && src.slice(0, common) === dst.slice(0, common) && (srcLen < dst.length ? dst[srcLen] === '/' : src[dst.length] === '/')) {
    log.error(`"${r.uri}" could not be ${r.method}ed to collection "${dest.raw}"`);
    return 403;
  }
  let dstIsDir = false;
  try {
    const st = fs.lstatSync(fsPath(dst));
    if (st.isDirectory() && !slash) {
      log.error(`"${r.uri}" could not be ${r.method}ed to collection "${dest.raw}"`);
      return 409;
    }
    if (!overwrite) {
      log.error(`"${dst}" could not be created (17: File exists)`);
      return 412;
    }
    dstIsDir = st.isDirectory();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return davError(r, err, 404, 'lstat()', dst);
    overwrite = false;
  }
  let st: fs.Stats;
  try {
    st = fs.lstatSync(fsPath(src));
  } catch (err) {
    return davError(r, err, 404, 'lstat()', src);
  }
  if (!st.isDirectory()) {
    if (r.method === 'MOVE') {
      const access = r.level.get(davSlot).access;
      return renameFile(r, src, dst, { access: 0, pathAccess: access, time: -1, createPath: true, deleteFile: false }) ? 204 : 500;
    }
    return copyFile(r, src, dst, st.mode & 0o777, st.mtimeMs / 1000) ? 204 : 500;
  }
  if (!r.uri.endsWith('/')) {
    log.error(`"${r.uri}" is collection`);
    return 400;
  }
  if (overwrite) {
    const rc = deletePath(r, dst, dstIsDir);
    if (rc !== 0) return rc;
  }
  src = src.slice(0, -1);
  if (r.method === 'MOVE') {
    try {
      fs.renameSync(fsPath(src), fsPath(dst));
      return 201;
    } catch { /* copied below, then removed */ }
  }
  try {
    fs.mkdirSync(fsPath(dst), { mode: st.mode & 0o777 });
  } catch (err) {
    return davError(r, err, 404, 'mkdir()', dst);
  }
  copyTree(r, src, dst);
  if (r.method === 'MOVE') {
    const rc = deletePath(r, src, true);
    if (rc !== 0) return rc;
  }
  return 201;
}

const directives: Directive[] = [
  {
    name: 'dav_methods', contexts: HTTP_ANY, args: [1, Infinity],
    // ngx_conf_set_bitmask_slot: a second line adds to the first (no "is duplicate"); nginx compares without case
    handler(cf, node) {
      const c = cf.get(davSlot);
      const methods = (c.methods ??= new Set());
      for (const m of bitmaskArgs(cf, node.args.map((a) => METHODS.find((x) => x === a.toLowerCase()) ?? a), METHODS)) {
        if (m !== 'off') methods.add(m.toUpperCase());
      }
      return undefined;
    },
  },
  { name: 'create_full_put_path', contexts: HTTP_ANY, args: 'flag', handler: setting(davSlot, 'createFullPutPath', flagArg) },
  {
    name: 'min_delete_depth', contexts: HTTP_ANY, args: 1,
    handler: setting(davSlot, 'minDeleteDepth', numberArg),
  },
  {
    name: 'dav_access', contexts: HTTP_ANY, args: [1, 3],
    handler: unique(davSlot, 'access', (cf, node, c) => {
      const access = parseAccess(node.args);
      // ngx_conf_set_access_slot logs the message itself (no directive name before it)
      if (typeof access === 'string') throw cf.error(access);
      c.access = access;
    }),
  },
];

export const davModule: HttpModule = {
  name: 'ngx_http_dav_module',
  directives,
  postconfiguration(http) {
    // nginx's place: after index (100) and autoindex (200), before gzip_static (250) and static (300)
    http.addPhaseHandler('CONTENT', 220, davHandler);
  },
};

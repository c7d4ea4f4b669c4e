/**
 * Error log lines about a request, with nginx's context suffix:
 * `... while <action>, client: 127.0.0.1, server: localhost, request: "GET / HTTP/1.1", host: "localhost"`.
 * The log is the location's `error_log` when it has one, else the main one.
 * Location-level error logs are opened when a configuration starts serving
 * (and checked, creating the files, by the master), as nginx opens them.
 */
import { checkLogFile, ErrorLog, LogLevel, mainErrorLog } from '../core/error-log.ts';
import type { ErrorLogSpec } from '../core/error-log.ts';
import { ConfError } from '../conf/errors.ts';
import type { HttpMainConf, LocationConf } from './http-conf.ts';
import { coreLoc } from './core/settings.ts';
import type { HttpRequest } from './request.ts';

/** Error logs of http/server/location levels, by their (inherited, shared) spec list. */
const logs = new WeakMap<ErrorLogSpec[], ErrorLog>();

export function errorLogFor(r: HttpRequest): ErrorLog {
  const specs = r.level.get(coreLoc).errorLogs;
  if (!specs) return mainErrorLog();
  let log = logs.get(specs);
  if (!log) {
    try {
      log = new ErrorLog(specs);
    } catch {
      return mainErrorLog();
    }
    logs.set(specs, log);
  }
  return log;
}

/** Every distinct error_log list of the http block's levels. */
function errorLogLists(http: HttpMainConf): Set<ErrorLogSpec[]> {
  const lists = new Set<ErrorLogSpec[]>();
  const add = (specs: ErrorLogSpec[] | undefined) => { if (specs) lists.add(specs); };
  const walk = (locs: Iterable<LocationConf>) => {
    for (const loc of locs) {
      add(loc.level.get(coreLoc).errorLogs);
      walk(loc.children);
      if (loc.limitExcept) add(loc.limitExcept.loc.level.get(coreLoc).errorLogs);
    }
  };
  add(http.level.get(coreLoc).errorLogs);
  for (const srv of http.servers) {
    add(srv.level.get(coreLoc).errorLogs);
    walk(srv.locations);
    walk(srv.named.values());
  }
  return lists;
}

/** The files of the http-level error logs (for `-t`, which opens every log file). */
export function requestErrorLogFiles(http: HttpMainConf): string[] {
  const files: string[] = [];
  for (const specs of errorLogLists(http)) for (const s of specs) if (s.file !== 'stderr') files.push(s.file);
  return files;
}

/**
 * Worker: opens the http-level error logs of a configuration; returns the
 * function that closes them. A file that cannot be opened is nginx's
 * `open() "…" failed` configuration error.
 */
export function openRequestErrorLogs(http: HttpMainConf): () => void {
  const opened: ErrorLog[] = [];
  const closeAll = () => { for (const log of opened) log.close(); };
  for (const specs of errorLogLists(http)) {
    if (logs.has(specs)) continue;
    let log: ErrorLog;
    try {
      log = new ErrorLog(specs);
    } catch (e) {
      closeAll();
      const file = (e as NodeJS.ErrnoException).path ?? specs[0]?.file ?? '';
      throw new ConfError(checkLogFile(file) ?? `open() "${file}" failed`);
    }
    logs.set(specs, log);
    opened.push(log);
  }
  return closeAll;
}

/** The request line for log messages: as received for a malformed request, else rebuilt. */
function requestLine(r: HttpRequest): string {
  return r.rawRequestLine ?? `${r.head.method} ${r.requestUri} HTTP/${r.httpVersion}`;
}

/** The ` while <action>, client: ..., server: ..., request: ..., host: ...` suffix nginx appends. */
export function requestContext(r: HttpRequest, action?: string): string {
  let s = action ? ` while ${action}` : '';
  s += `, client: ${r.remoteAddress}, server: ${r.server.primaryName}`;
  const line = requestLine(r);
  if (line) s += `, request: "${line}"`;
  if (r.parent) s += `, subrequest: "${r.uri}"`;
  const upstream = r.ctx.get(UPSTREAM_CONTEXT) as string | undefined;
  if (upstream) s += `, upstream: "${upstream}"`;
  const host = r.header('host');
  if (host !== undefined) s += `, host: "${host}"`;
  const referrer = r.header('referer');
  if (referrer !== undefined) s += `, referrer: "${referrer}"`;
  return s;
}

/** Key under which the proxy records the upstream URL being talked to, for log lines. */
export const UPSTREAM_CONTEXT = {};

export interface RequestLogger {
  log(level: number, msg: string): void;
  error(msg: string): void;
  warn(msg: string): void;
  notice(msg: string): void;
  info(msg: string): void;
  debug(msg: string): void;
  crit(msg: string): void;
  alert(msg: string): void;
}

/** A logger for `r`; `action` is nginx's "while ..." part (e.g. `logging request`). */
export function requestLog(r: HttpRequest, action?: string): RequestLogger {
  const log = errorLogFor(r);
  const write = (level: number, msg: string) => {
    // nginx appends the context to every level but debug (ngx_log_error_core)
    if (log.enabled(level)) log.log(level, level === LogLevel.debug ? msg : msg + requestContext(r, action), r.conn.number);
  };
  return {
    log: write,
    error: (m) => write(LogLevel.error, m),
    warn: (m) => write(LogLevel.warn, m),
    notice: (m) => write(LogLevel.notice, m),
    info: (m) => write(LogLevel.info, m),
    debug: (m) => write(LogLevel.debug, m),
    crit: (m) => write(LogLevel.crit, m),
    alert: (m) => write(LogLevel.alert, m),
  };
}


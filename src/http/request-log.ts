/**
 * Error log lines about a request, with nginx's context suffix:
 * `..., client: 127.0.0.1, server: localhost, request: "GET / HTTP/1.1", host: "localhost"`.
 * The log is the location's `error_log` when it has one, else the main one.
 */
import { ErrorLog, LogLevel, mainErrorLog } from '../core/error-log.ts';
import type { ErrorLogSpec } from '../core/error-log.ts';
import { coreLoc } from './modules/core/settings.ts';
import type { HttpRequest } from './request.ts';

const logs = new WeakMap<ErrorLogSpec[], ErrorLog>();

export function errorLogFor(r: HttpRequest): ErrorLog {
  const specs = r.level.get(coreLoc).errorLogs;
  if (!specs) return mainErrorLog();
  let log = logs.get(specs);
  if (!log) {
    log = new ErrorLog(specs);
    logs.set(specs, log);
  }
  return log;
}

/** The `, client: ..., server: ..., request: ..., host: ...` suffix nginx appends. */
export function requestContext(r: HttpRequest): string {
  let s = `, client: ${r.conn.remoteAddress}, server: ${r.server.primaryName}`;
  s += `, request: "${r.method} ${r.requestUri} HTTP/${r.httpVersion}"`;
  const upstream = r.ctx.get(UPSTREAM_CONTEXT) as string | undefined;
  if (upstream) s += `, upstream: "${upstream}"`;
  const host = r.req.headers.host;
  if (host !== undefined) s += `, host: "${host}"`;
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

export function requestLog(r: HttpRequest): RequestLogger {
  const log = errorLogFor(r);
  const write = (level: number, msg: string) => {
    if (log.enabled(level)) log.log(level, msg + requestContext(r), r.conn.number);
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

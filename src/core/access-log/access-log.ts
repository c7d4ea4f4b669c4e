/**
 * The access log of http and stream: what `log_format`, `access_log` and
 * `open_log_file_cache` do, and the writing of one line per request or
 * session, generic over what is logged (HttpRequest or StreamSession).
 * nginx's stream log module is a copy of its http one; here both modules
 * keep their directive tables and call into this file, and pass what truly
 * differs as an AccessLogProtocol (their slots and variables, http's
 * default format and log operations, how an error about a request or a
 * session is reported).
 *
 * It lives in the core, with its formats (format.ts), syslog sender
 * (syslog.ts) and descriptor cache (variable-path.ts), because stream
 * imports nothing of http (test/layering/layers.ts, APART).
 */
import type { ConfContext, ConfSlot } from '../../conf/context.ts';
import { ConfError } from '../../conf/errors.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { parseSize, parseTime } from '../../conf/values.ts';
import { Cycle } from '../cycle.ts';
import { checkLogFile, mainErrorLog } from '../error-log.ts';
import { LogFile } from '../log-file.ts';
import { checkSyslog } from '../error-log-args.ts';
import { compileComplex } from '../variables.ts';
import type { ComplexValue, VariableHost, VariableRegistry } from '../variables.ts';
import { compileFormat, parseFormat } from './format.ts';
import type { LogFormat, LogOps, Render } from './format.ts';
import { SyslogPeer } from './syslog.ts';
import { OpenLogFileCache, writeToVariablePath } from './variable-path.ts';
import type { ReportError } from './variable-path.ts';

/** One `access_log` directive. */
export interface AccessLog<T extends VariableHost> {
  render: Render<T>;
  /** A path without variables: shared by every directive naming it. */
  file?: LogFile;
  /** A path with variables, made absolute: the file is opened for each line. */
  path?: ComplexValue<T>;
  /** `syslog:server=…`. */
  syslog?: SyslogPeer;
  /** `if=`: no line when empty or "0". */
  filter?: ComplexValue<T>;
}

/** One level's logs (an http location, a stream server). */
export interface LogLevelConf<T extends VariableHost> {
  /** This level's logs, or inherited as a whole from the nearest level that has some. */
  logs?: AccessLog<T>[];
  off?: boolean;
  /** `open_log_file_cache`: null is `off`. */
  cache?: OpenLogFileCache | null;
}

/** What the http or stream block holds: formats, and what each worker opens and closes. */
export interface LogMainConf<T> {
  formats: LogFormat<T>[];
  /** Files without variables, by absolute path. */
  files: Map<string, LogFile>;
  caches: OpenLogFileCache[];
  syslogs: SyslogPeer[];
}

/** What differs between the http and the stream access log. */
export interface AccessLogProtocol<T extends VariableHost> {
  /** The block whose level holds LogMainConf: 'http' or 'stream'. */
  block: string;
  main: ConfSlot<LogMainConf<T>>;
  level: ConfSlot<LogLevelConf<T>>;
  variables(cf: ConfContext): VariableRegistry<T>;
  /** The format of an access_log that names none (http's `combined`); without it, one must be named. */
  defaultFormat?: string;
  ops?: LogOps<T>;
  report: ReportError<T>;
  /** Whether a path with variables may be written for `x` now (http: its root directory exists). */
  mayWritePath?(x: T): boolean;
}

export function newLogMain<T>(formats: LogFormat<T>[] = []): LogMainConf<T> {
  return { formats, files: new Map(), caches: [], syslogs: [] };
}

/** A level with access_log (or off) keeps its own; otherwise it takes its parent's whole list. */
export function mergeLogLevel<T extends VariableHost>(parent: LogLevelConf<T>, child: LogLevelConf<T>): void {
  if (child.logs === undefined && !child.off) {
    child.logs = parent.logs;
    child.off = parent.off;
  }
  if (child.cache === undefined) child.cache = parent.cache;
}

/** The format's compiled render (compiled here the first time, for http's built-in `combined`). */
export function renderOf<T extends VariableHost>(format: LogFormat<T>, vars: VariableRegistry<T>, ops: LogOps<T> | undefined): Render<T> {
  return format.render ??= compileFormat(vars, format.parts, format.escape, ops);
}

/** `log_format name [escape=…] string ...`. */
export function setLogFormat<T extends VariableHost>(p: AccessLogProtocol<T>, cf: ConfContext, node: ConfNode): void {
  const main = cf.get(p.main);
  const [name, ...rest] = node.args;
  if (main.formats.some((f) => f.name === name)) throw cf.error(`duplicate "log_format" name "${name}"`);
  let parsed: ReturnType<typeof parseFormat>;
  try {
    parsed = parseFormat(rest);
  } catch (e) {
    throw cf.error((e as Error).message);
  }
  const format: LogFormat<T> = { name, ...parsed };
  renderOf(format, p.variables(cf), p.ops);
  main.formats.push(format);
}

/** `access_log off | path [format [buffer=size] [gzip[=level]] [flush=time] [if=condition]]`. */
export function setAccessLog<T extends VariableHost>(p: AccessLogProtocol<T>, cf: ConfContext, node: ConfNode): void {
  const a = node.args;
  const conf = cf.get(p.level);
  if (a[0] === 'off') {
    conf.off = true;
    if (a.length > 1) throw cf.error(`invalid parameter "${a[1]}"`);
    return;
  }
  const main = cf.at(p.block, p.main);
  const vars = p.variables(cf);
  const log = {} as AccessLog<T>;
  // nginx's ngx_conf_full_name: relative to the prefix, by plain concatenation
  const full = a[0].startsWith('/') ? a[0] : cf.paths.prefix + a[0];
  if (a[0].startsWith('syslog:')) {
    checkSyslog(cf, a[0].slice(7));
    log.syslog = new SyslogPeer(a[0].slice(7), (m) => mainErrorLog().warn(m));
    if (log.syslog.unix) cf.warn('syslog over a unix socket is not supported, its lines are dropped');
    main.syslogs.push(log.syslog);
  } else if (a[0].includes('$')) {
    log.path = compileComplex(cf, vars, full);
  } else {
    log.file = logFileFor(main, full);
    Cycle.of(cf).registerOpenFile(full);
  }

  const name = a[1] ?? p.defaultFormat;
  if (name === undefined) throw cf.error('log format is not specified');
  const format = main.formats.find((f) => f.name.toLowerCase() === name.toLowerCase());
  if (!format) throw cf.error(`unknown log format "${name}"`);
  log.render = renderOf(format, vars, p.ops);

  let size = 0;
  let flushMs = 0;
  let gzip = 0;
  for (const param of a.slice(2)) {
    if (param.startsWith('buffer=')) {
      size = parseSize(param.slice(7));
      if (!(size > 0)) throw cf.error(`invalid buffer size "${param.slice(7)}"`);
    } else if (param.startsWith('flush=')) {
      flushMs = parseTime(param.slice(6));
      if (!(flushMs > 0)) throw cf.error(`invalid flush time "${param.slice(6)}"`);
    } else if (param === 'gzip' || param.startsWith('gzip=')) {
      if (size === 0) size = 64 * 1024;
      gzip = param === 'gzip' ? 1 : /^\d+$/.test(param.slice(5)) ? Number(param.slice(5)) : 0;
      if (gzip < 1 || gzip > 9) throw cf.error(`invalid compression level "${param.slice(5)}"`);
    } else if (param.startsWith('if=')) {
      log.filter = compileComplex(cf, vars, param.slice(3));
    } else {
      throw cf.error(`invalid parameter "${param}"`);
    }
  }
  if (flushMs && !size) throw cf.error(`no buffer is defined for access_log "${a[0]}"`);
  if (size) {
    if (log.syslog) throw cf.error('logs to syslog cannot be buffered');
    if (!log.file) throw cf.error('buffered logs cannot have variables in name');
    // one file, one buffer: every access_log naming it must agree
    const b = log.file.buffer;
    if (b && (b.size !== size || b.flushMs !== flushMs || b.gzip !== gzip)) {
      throw cf.error(`access_log "${a[0]}" already defined with conflicting parameters`);
    }
    log.file.buffer ??= { size, flushMs, gzip };
  }
  (conf.logs ??= []).push(log);
}

/** The block's one LogFile for `path` (created on first use). */
export function logFileFor<T>(main: LogMainConf<T>, path: string): LogFile {
  let f = main.files.get(path);
  if (!f) {
    f = new LogFile(path);
    main.files.set(path, f);
  }
  return f;
}

/** `open_log_file_cache off | max=N [inactive=time] [min_uses=N] [valid=time]`. */
export function setOpenLogFileCache<T extends VariableHost>(p: AccessLogProtocol<T>, cf: ConfContext, node: ConfNode): string | void {
  const conf = cf.get(p.level);
  if (conf.cache !== undefined) return 'is duplicate';
  const o = { max: 0, inactiveMs: 10_000, minUses: 1, validMs: 60_000 };
  let off = false;
  for (const param of node.args) {
    const eq = param.indexOf('=');
    const key = eq < 0 ? param : param.slice(0, eq + 1);
    const v = param.slice(eq + 1);
    let n = NaN;
    if (key === 'max=' && /^\d+$/.test(v)) n = o.max = Number(v);
    else if (key === 'min_uses=' && /^\d+$/.test(v)) n = o.minUses = Number(v);
    else if (key === 'inactive=') n = o.inactiveMs = parseTime(v);
    else if (key === 'valid=') n = o.validMs = parseTime(v);
    else if (param === 'off') { off = true; n = 0; }
    if (Number.isNaN(n)) throw cf.error(`invalid "open_log_file_cache" parameter "${param}"`);
  }
  if (off) { conf.cache = null; return; }
  if (o.max === 0) throw cf.error('"open_log_file_cache" must have "max" parameter');
  conf.cache = new OpenLogFileCache(o);
  cf.at(p.block, p.main).caches.push(conf.cache);
}

/** Writes the lines of `logs` for `x`, when its request or session is done. */
export function writeAccessLogs<T extends VariableHost>(p: AccessLogProtocol<T>, x: T, logs: AccessLog<T>[], cache: OpenLogFileCache | undefined): void {
  for (let i = 0; i < logs.length; i++) {
    const log = logs[i];
    if (log.filter) {
      const v = log.filter.evaluate(x);
      if (v === '' || v === '0') continue;
    }
    if (log.syslog) {
      log.syslog.send(log.render(x));
      continue;
    }
    const line = log.render(x) + '\n';
    if (log.file) {
      log.file.write(line);
      continue;
    }
    const path = log.path!.evaluate(x);
    if (!p.mayWritePath || p.mayWritePath(x)) writeToVariablePath(x, p.report, path, cache, line);
  }
}

/**
 * Opens the block's files in this worker and returns what closes them all
 * (with cached descriptors and syslog sockets). A file that cannot be
 * opened fails this configuration (the start, or the reload), as in nginx.
 */
export function openLogFiles<T>(main: LogMainConf<T>): () => void {
  const closeAll = () => {
    for (const f of main.files.values()) f.close();
    for (const c of main.caches) c.close();
    for (const s of main.syslogs) s.close();
  };
  for (const f of main.files.values()) {
    try {
      f.open();
    } catch {
      closeAll();
      throw new ConfError(checkLogFile(f.path) ?? `open() "${f.path}" failed`);
    }
  }
  return closeAll;
}

/**
 * ngx_stream_log_module: `log_format`, `access_log` and
 * `open_log_file_cache` of the stream block; one line per session and log
 * when the session ends. Unlike http there is no default log and no
 * built-in format: a format must be defined before an access_log names it.
 * Format parsing, escaping and syslog are the http log module's; files are
 * the core's LogFile (one write per turn of the event loop, `buffer=`,
 * `flush=`, `gzip`, reopened on USR1).
 */
import fs from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { ConfError, sysErrorText } from '../../conf/errors.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { parseSize, parseTime } from '../../conf/values.ts';
import { Cycle } from '../../core/cycle.ts';
import { checkLogFile, LogLevel, openAppend, writeAll } from '../../core/error-log.ts';
import { LogFile } from '../../core/log-file.ts';
import { escapeDefault, escapeJson, parseFormat } from '../../http/modules/log/format.ts';
import type { Escape, FormatPart } from '../../http/modules/log/format.ts';
import { SyslogPeer } from '../../http/modules/log/syslog.ts';
import { OpenLogFileCache } from '../../http/modules/log/variable-path.ts';
import { checkSyslog } from '../../core/modules/core.ts';
import { compileComplex } from '../../http/variables.ts';
import type { ComplexValue, VariableRegistry } from '../../http/variables.ts';
import { streamConf, streamMainOf } from '../conf.ts';
import type { StreamModule } from '../conf.ts';
import type { StreamSession } from '../session.ts';

type Render = (s: StreamSession) => string;

interface StreamLogFormat {
  name: string;
  render: Render;
}

interface AccessLog {
  format: StreamLogFormat;
  /** A path without variables: shared by every directive naming it. */
  file?: LogFile;
  /** `syslog:server=…`. */
  syslog?: SyslogPeer;
  /** A path with variables: the file is opened for each line. */
  path?: ComplexValue<StreamSession>;
  /** `if=`: no line when empty or "0". */
  filter?: ComplexValue<StreamSession>;
}

interface LogSrvConf {
  logs?: AccessLog[];
  off?: boolean;
  /** `open_log_file_cache`; null is `off`. */
  cache?: OpenLogFileCache | null;
}

const logSrv = defineSlot<LogSrvConf>('stream_log_srv', () => ({}), (parent, child) => {
  if (child.logs === undefined && !child.off) {
    child.logs = parent.logs;
    child.off = parent.off;
  }
  if (child.cache === undefined) child.cache = parent.cache;
});

const logMain = defineSlot<{ formats: StreamLogFormat[]; files: Map<string, LogFile>; caches: OpenLogFileCache[]; syslogs: SyslogPeer[] }>(
  'stream_log_main', () => ({ formats: [], files: new Map(), caches: [], syslogs: [] }));

/** Compiles a format into one function of the session (ngx_stream_log_compile_format). */
function compileFormat(vars: VariableRegistry<StreamSession>, parts: FormatPart[], escape: Escape): Render {
  const pieces: Array<string | Render> = parts.map((p) => {
    if (typeof p === 'string') return p;
    const index = vars.index(p.variable);
    if (escape === 'json') return (s: StreamSession) => { const v = vars.value(s, index); return v === undefined ? '' : escapeJson(v); };
    if (escape === 'none') return (s: StreamSession) => vars.value(s, index) ?? '';
    return (s: StreamSession) => { const v = vars.value(s, index); return v === undefined ? '-' : escapeDefault(v); };
  });
  return (s) => {
    let line = '';
    for (let i = 0; i < pieces.length; i++) {
      const p = pieces[i];
      line += typeof p === 'string' ? p : p(s);
    }
    return line;
  };
}

function setFormat(cf: ConfContext, node: ConfNode): void {
  const main = cf.get(logMain);
  const [name, ...rest] = node.args;
  if (main.formats.some((f) => f.name === name)) throw cf.error(`duplicate "log_format" name "${name}"`);
  try {
    const { escape, parts } = parseFormat(rest);
    main.formats.push({ name, render: compileFormat(streamMainOf(cf).variables, parts, escape) });
  } catch (e) {
    throw e instanceof ConfError ? e : cf.error((e as Error).message);
  }
}

function setLog(cf: ConfContext, node: ConfNode): void {
  const a = node.args;
  const conf = cf.get(logSrv);
  if (a[0] === 'off') {
    conf.off = true;
    if (a.length > 1) throw cf.error(`invalid parameter "${a[1]}"`);
    return;
  }
  const main = cf.at('stream', logMain);
  const vars = streamMainOf(cf).variables;
  const log = {} as AccessLog;
  // nginx's ngx_conf_full_name: relative to the prefix, by plain concatenation
  const full = a[0].startsWith('/') ? a[0] : cf.paths.prefix + a[0];
  if (a[0].startsWith('syslog:')) {
    checkSyslog(cf, a[0].slice(7));
    log.syslog = new SyslogPeer(a[0].slice(7));
    if (log.syslog.unix) cf.warn('syslog over a unix socket is not supported, its lines are dropped');
    main.syslogs.push(log.syslog);
  } else if (a[0].includes('$')) log.path = compileComplex(cf, vars, full);
  else {
    log.file = main.files.get(full);
    if (!log.file) main.files.set(full, log.file = new LogFile(full));
    Cycle.of(cf).registerOpenFile(full);
  }
  if (a.length < 2) throw cf.error('log format is not specified');
  const format = main.formats.find((f) => f.name.toLowerCase() === a[1].toLowerCase());
  if (!format) throw cf.error(`unknown log format "${a[1]}"`);
  log.format = format;
  let size = 0;
  let flushMs = 0;
  let gzip = 0;
  for (const p of a.slice(2)) {
    if (p.startsWith('buffer=')) {
      size = parseSize(p.slice(7));
      if (!(size > 0)) throw cf.error(`invalid buffer size "${p.slice(7)}"`);
    } else if (p.startsWith('flush=')) {
      flushMs = parseTime(p.slice(6));
      if (!(flushMs > 0)) throw cf.error(`invalid flush time "${p.slice(6)}"`);
    } else if (p === 'gzip' || p.startsWith('gzip=')) {
      if (size === 0) size = 64 * 1024;
      gzip = p === 'gzip' ? 1 : /^\d+$/.test(p.slice(5)) ? Number(p.slice(5)) : 0;
      if (gzip < 1 || gzip > 9) throw cf.error(`invalid compression level "${p.slice(5)}"`);
    } else if (p.startsWith('if=')) {
      log.filter = compileComplex(cf, vars, p.slice(3));
    } else {
      throw cf.error(`invalid parameter "${p}"`);
    }
  }
  if (flushMs && !size) throw cf.error(`no buffer is defined for access_log "${a[0]}"`);
  if (size) {
    if (log.syslog) throw cf.error('logs to syslog cannot be buffered');
    if (!log.file) throw cf.error('buffered logs cannot have variables in name');
    const b = log.file.buffer;
    if (b && (b.size !== size || b.flushMs !== flushMs || b.gzip !== gzip)) {
      throw cf.error(`access_log "${a[0]}" already defined with conflicting parameters`);
    }
    log.file.buffer ??= { size, flushMs, gzip };
  }
  (conf.logs ??= []).push(log);
}

function setCache(cf: ConfContext, node: ConfNode): string | void {
  const conf = cf.get(logSrv);
  if (conf.cache !== undefined) return 'is duplicate';
  const o = { max: 0, inactiveMs: 10_000, minUses: 1, validMs: 60_000 };
  let off = false;
  for (const p of node.args) {
    const eq = p.indexOf('=');
    const key = eq < 0 ? p : p.slice(0, eq + 1);
    const v = p.slice(eq + 1);
    let n = NaN;
    if (key === 'max=' && /^\d+$/.test(v)) n = o.max = Number(v);
    else if (key === 'min_uses=' && /^\d+$/.test(v)) n = o.minUses = Number(v);
    else if (key === 'inactive=') n = o.inactiveMs = parseTime(v);
    else if (key === 'valid=') n = o.validMs = parseTime(v);
    else if (p === 'off') { off = true; n = 0; }
    if (Number.isNaN(n)) throw cf.error(`invalid "open_log_file_cache" parameter "${p}"`);
  }
  if (off) { conf.cache = null; return; }
  if (o.max === 0) throw cf.error('"open_log_file_cache" must have "max" parameter');
  conf.cache = new OpenLogFileCache(o);
  cf.at('stream', logMain).caches.push(conf.cache);
}

/** A line to a file named by variables (ngx_stream_log_script_write): opened per line unless cached. */
function writeToPath(s: StreamSession, path: string, cache: OpenLogFileCache | undefined, line: string): void {
  let fd: number;
  let kept = false;
  try {
    if (cache) ({ fd, kept } = cache.open(path, Date.now()));
    else fd = openAppend(path);
  } catch (e) {
    s.error(LogLevel.crit, `open() "${path}" failed ${sysErrorText(e)}`);
    return;
  }
  try {
    writeAll(fd, Buffer.from(line, 'latin1'));
  } catch (e) {
    s.error(LogLevel.alert, `write() to "${path}" failed ${sysErrorText(e)}`);
  } finally {
    if (!kept) fs.closeSync(fd);
  }
}

function logHandler(s: StreamSession): void {
  const conf = s.level.get(logSrv);
  const logs = conf.logs;
  if (conf.off || !logs) return;
  for (let i = 0; i < logs.length; i++) {
    const log = logs[i];
    if (log.filter) {
      const v = log.filter.evaluate(s);
      if (v === '' || v === '0') continue;
    }
    if (log.syslog) {
      log.syslog.send(log.format.render(s));
      continue;
    }
    const line = log.format.render(s) + '\n';
    if (log.file) log.file.write(line);
    else writeToPath(s, log.path!.evaluate(s), conf.cache ?? undefined, line);
  }
}

const directives: Directive[] = [
  { name: 'log_format', contexts: Ctx.STREAM, args: [2, Infinity], handler: setFormat },
  { name: 'access_log', contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: [1, Infinity], handler: setLog },
  { name: 'open_log_file_cache', contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: [1, 4], handler: setCache },
];

export const streamLogModule: StreamModule = {
  name: 'ngx_stream_log_module',
  directives,
  postconfiguration(stream) {
    stream.addLogHandler(logHandler);
  },
  initCycle(cycle) {
    const stream = streamConf(cycle);
    // the master checks (and creates) every file, as nginx opens them at startup
    if (!stream || !isMainThread) return;
    for (const file of stream.level.get(logMain).files.keys()) {
      const err = checkLogFile(file);
      if (err) throw new ConfError(err);
    }
  },
  initWorker(cycle, worker) {
    const stream = streamConf(cycle);
    if (!stream) return;
    const main = stream.level.get(logMain);
    const closeAll = () => {
      for (const f of main.files.values()) f.close();
      for (const c of main.caches) c.close();
      for (const p of main.syslogs) p.close();
    };
    // a file that cannot be opened fails this configuration (the start, or the reload), as in nginx
    for (const f of main.files.values()) {
      try {
        f.open();
      } catch {
        closeAll();
        throw new ConfError(checkLogFile(f.path) ?? `open() "${f.path}" failed`);
      }
    }
    worker.onClose(closeAll);
  },
};

/**
 * ngx_http_log_module: `log_format`, `access_log`, `open_log_file_cache`,
 * and the log phase that writes one line per request and log, after the
 * response (also for error pages, client aborts and malformed requests).
 *
 * Formats, `if=` conditions and paths with variables are compiled when
 * read. Files are opened by each worker when it loads the configuration (a
 * file that cannot be opened fails the start or the reload, as in nginx) and
 * closed when that configuration stops serving; `-t` opens them all.
 */
import { defineSlot } from '../../../conf/context.ts';
import type { ConfContext } from '../../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../../conf/directive.ts';
import type { Directive } from '../../../conf/directive.ts';
import { ConfError } from '../../../conf/errors.ts';
import type { ConfNode } from '../../../conf/parser.ts';
import { parseSize, parseTime } from '../../../conf/values.ts';
import { Cycle } from '../../../core/cycle.ts';
import { checkLogFile } from '../../../core/error-log.ts';
import { checkSyslog } from '../../../core/modules/core.ts';
import { LogFile } from '../../../core/log-file.ts';
import { httpMainOf, OK } from '../../http-conf.ts';
import type { HttpMainConf, HttpModule, PhaseHandler } from '../../http-conf.ts';
import { trackResponseBytes } from '../../request-bytes.ts';
import { openRequestErrorLogs, requestErrorLogFiles } from '../../request-log.ts';
import { compileComplex } from '../../variables.ts';
import type { ComplexValue, VariableRegistry } from '../../variables.ts';
import { httpConf } from '../core/structure.ts';
import { COMBINED_FORMAT, compileFormat, parseFormat } from './format.ts';
import type { LogFormat } from './format.ts';
import { SyslogPeer } from './syslog.ts';
import { OpenLogFileCache, writeToVariablePath } from './variable-path.ts';

/** One `access_log` directive. */
interface AccessLog {
  format: LogFormat;
  /** A path without variables: shared by every directive naming it. */
  file?: LogFile;
  /** A path with variables, made absolute. */
  path?: ComplexValue;
  /** `syslog:server=…`. */
  syslog?: SyslogPeer;
  /** `if=`: skip the line when empty or "0". */
  filter?: ComplexValue;
}

interface LogLocConf {
  /** This level's logs, or inherited as a whole from the nearest level that has some. */
  logs?: AccessLog[];
  off?: boolean;
  /** `open_log_file_cache`: null is `off`. */
  cache?: OpenLogFileCache | null;
}

interface LogMainConf {
  formats: LogFormat[];
  /** Files without variables, by absolute path. */
  files: Map<string, LogFile>;
  caches: OpenLogFileCache[];
  syslogs: SyslogPeer[];
  /** nginx's default `logs/access.log combined`, for servers with no access_log of their own. */
  defaultLogs?: AccessLog[];
}

const logLoc = defineSlot<LogLocConf>('http_log_loc', () => ({}), (parent, child) => {
  // a level with access_log (or off) keeps its own; otherwise it takes its parent's whole list
  if (child.logs === undefined && !child.off) {
    child.logs = parent.logs;
    child.off = parent.off;
  }
  if (child.cache === undefined) child.cache = parent.cache;
});

const logMain = defineSlot<LogMainConf>('http_log_main', () => ({
  formats: [{ name: 'combined', ...parseFormat([COMBINED_FORMAT]) }],
  files: new Map(),
  caches: [],
  syslogs: [],
}));

/** The compiled format (the built-in `combined` is compiled on first use). */
function rendered(format: LogFormat, vars: VariableRegistry): LogFormat {
  format.render ??= compileFormat(vars, format.parts, format.escape);
  return format;
}

function logFileFor(main: LogMainConf, path: string): LogFile {
  let f = main.files.get(path);
  if (!f) {
    f = new LogFile(path);
    main.files.set(path, f);
  }
  return f;
}

function setLog(cf: ConfContext, node: ConfNode): string | void {
  const a = node.args;
  const conf = cf.get(logLoc);
  if (a[0] === 'off') {
    conf.off = true;
    if (a.length > 1) throw cf.error(`invalid parameter "${a[1]}"`);
    return;
  }
  const main = cf.at('http', logMain);
  const vars = httpMainOf(cf).variables;
  const log = {} as AccessLog;
  // nginx's ngx_conf_full_name: relative to the prefix, by plain concatenation
  const full = a[0].startsWith('/') ? a[0] : cf.paths.prefix + a[0];
  if (a[0].startsWith('syslog:')) {
    checkSyslog(cf, a[0].slice(7));
    log.syslog = new SyslogPeer(a[0].slice(7));
    if (log.syslog.unix) cf.warn('syslog over a unix socket is not supported, its lines are dropped');
    main.syslogs.push(log.syslog);
  } else if (a[0].includes('$')) {
    log.path = compileComplex(cf, vars, full);
  } else {
    log.file = logFileFor(main, full);
    Cycle.of(cf).registerOpenFile(full);
  }

  const name = a[1] ?? 'combined';
  const format = main.formats.find((f) => f.name.toLowerCase() === name.toLowerCase());
  if (!format) throw cf.error(`unknown log format "${name}"`);
  log.format = rendered(format, vars);

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

function setFormat(cf: ConfContext, node: ConfNode): string | void {
  const main = cf.get(logMain);
  const [name, ...rest] = node.args;
  if (main.formats.some((f) => f.name === name)) throw cf.error(`duplicate "log_format" name "${name}"`);
  let parsed: ReturnType<typeof parseFormat>;
  try {
    parsed = parseFormat(rest);
  } catch (e) {
    throw cf.error((e as Error).message);
  }
  main.formats.push(rendered({ name, ...parsed }, httpMainOf(cf).variables));
}

function setCache(cf: ConfContext, node: ConfNode): string | void {
  const conf = cf.get(logLoc);
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
  cf.at('http', logMain).caches.push(conf.cache);
}

const directives: Directive[] = [
  { name: 'log_format', contexts: Ctx.HTTP, args: [2, Infinity], handler: setFormat },
  { name: 'access_log', contexts: HTTP_ANY | Ctx.LIF | Ctx.LMT, args: [1, Infinity], handler: setLog },
  { name: 'open_log_file_cache', contexts: HTTP_ANY, args: [1, 4], handler: setCache },
];

function logPhase(main: LogMainConf): PhaseHandler {
  return (r) => {
    const conf = r.level.get(logLoc);
    if (conf.off) return OK;
    const logs = conf.logs ?? main.defaultLogs;
    if (logs === undefined) return OK;
    for (let i = 0; i < logs.length; i++) {
      const log = logs[i];
      if (log.filter) {
        const v = log.filter.evaluate(r);
        if (v === '' || v === '0') continue;
      }
      if (log.syslog) {
        log.syslog.send(log.format.render!(r));
        continue;
      }
      const line = log.format.render!(r) + '\n';
      if (log.file) log.file.write(line);
      else writeToVariablePath(r, log.path!.evaluate(r), conf.cache ?? undefined, line);
    }
    return OK;
  };
}

/** nginx creates the default log for servers that have no access_log of their own (and are not `off`). */
function addDefaultLog(cycle: Cycle, http: HttpMainConf, main: LogMainConf): void {
  const needed = http.servers.some((s) => {
    const c = s.level.get(logLoc);
    return c.logs === undefined && !c.off;
  });
  if (!needed) return;
  const file = cycle.paths.prefix + 'logs/access.log';
  cycle.registerOpenFile(file);
  main.defaultLogs = [{ format: rendered(main.formats[0], http.variables), file: logFileFor(main, file) }];
}

export const logModule: HttpModule = {
  name: 'ngx_http_log_module',
  directives,
  postconfiguration(http) {
    const main = http.level.get(logMain);
    http.addPhaseHandler('LOG', logPhase(main));
    http.addHeaderFilter(trackResponseBytes);
  },
  initCycle(cycle) {
    const http = httpConf(cycle);
    if (!http) return;
    const main = http.level.get(logMain);
    addDefaultLog(cycle, http, main);
    for (const file of requestErrorLogFiles(http)) cycle.registerOpenFile(file);
  },
  initWorker(cycle, worker) {
    const http = httpConf(cycle);
    if (!http) return;
    const main = http.level.get(logMain);
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
    let closeErrorLogs: () => void;
    try {
      closeErrorLogs = openRequestErrorLogs(http);
    } catch (e) {
      closeAll();
      throw e;
    }
    worker.onClose(() => {
      closeAll();
      closeErrorLogs();
    });
  },
};

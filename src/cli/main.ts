/**
 * `gatehouse` — nginx's command line: -?/-h -v -V -t -T -q -s -p -c -e -g,
 * with nginx's messages and exit codes; `gatehouse gateway` starts the
 * APISIX-style gateway (see src/gateway).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cycle, resolvePaths } from '../core/cycle.ts';
import { ErrorLog, LogLevel } from '../core/error-log.ts';
import { coreSettings, testCycleFiles } from '../core/modules/core.ts';
import { Master, startBanner } from '../process/master.ts';
import { openCycleLog } from '../core/cycle-log.ts';
import { BindFailed, checkBindable } from '../core/bind-check.ts';
import { ConfError, sysErrorText } from '../conf/errors.ts';
import { fullName } from '../conf/parser.ts';
import { modules } from '../modules.ts';
import { GATEHOUSE_NAME, GATEHOUSE_VERSION, NGINX_VER } from '../core/version.ts';
import { WITH, WITHOUT } from './features.ts';
import { daemonize, daemonReportSent, receiveSnapshot, reportDaemonReady, takeDaemonChild } from './daemon.ts';

const ROOT = path.resolve(fileURLToPath(new URL('../..', import.meta.url)));
const NAME = GATEHOUSE_NAME;

export interface Options {
  help: boolean;
  version: 0 | 1 | 2;
  test: boolean;
  dump: boolean;
  quiet: boolean;
  signal?: string;
  prefix?: string;
  conf?: string;
  errorLog?: string;
  globals?: string;
}

class UsageError extends Error {}

/** ngx_get_options: flags may be combined (`-tq`), values attached (`-pdir`) or separate. */
export function parseOptions(argv: string[]): Options {
  const o: Options = { help: false, version: 0, test: false, dump: false, quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg[0] !== '-') throw new UsageError(`invalid option: "${arg}"`);
    let p = 1;
    while (p < arg.length) {
      const ch = arg[p++];
      const value = (what: string, opt: string): string => {
        if (p < arg.length) { const v = arg.slice(p); p = arg.length; return v; }
        if (i + 1 < argv.length) return argv[++i];
        throw new UsageError(`option "-${opt}" requires ${what}`);
      };
      switch (ch) {
        case '?': case 'h': o.help = true; break;
        case 'v': o.version = Math.max(o.version, 1) as 1 | 2; break;
        case 'V': o.version = 2; break;
        case 't': o.test = true; break;
        case 'T': o.test = true; o.dump = true; break;
        case 'q': o.quiet = true; break;
        case 'p': o.prefix = value('directory name', 'p'); break;
        case 'c': o.conf = value('file name', 'c'); break;
        case 'e': o.errorLog = value('file name', 'e'); break;
        case 'g': o.globals = value('parameter', 'g'); break;
        case 's': {
          const s = value('parameter', 's');
          if (!['stop', 'quit', 'reopen', 'reload'].includes(s)) throw new UsageError(`invalid option: "-s ${s}"`);
          o.signal = s;
          break;
        }
        default: throw new UsageError(`invalid option: "${ch}"`);
      }
    }
  }
  return o;
}

function versionText(full: boolean): string {
  let s = `${NAME} version: ${NAME}/${GATEHOUSE_VERSION}\nnginx version: ${NGINX_VER}\n`;
  if (!full) return s;
  s += `built by node ${process.version}\n`;
  s += `built with OpenSSL ${process.versions.openssl}\n`;
  s += 'TLS SNI support enabled\n';
  s += `configure arguments: --prefix=${ROOT}/ --conf-path=conf/nginx.conf`
    + WITH.map((m) => ` --with-${m}`).join('') + WITHOUT.map((m) => ` --without-${m}`).join('') + '\n';
  return s;
}

function helpText(): string {
  return `Usage: ${NAME} [-?hvVtTq] [-s signal] [-p prefix]
             [-e filename] [-c filename] [-g directives]
       ${NAME} gateway [-p prefix] [-c config.yaml] [-t] [-T]

Options:
  -?,-h         : this help
  -v            : show version and exit
  -V            : show version and configure options then exit
  -t            : test configuration and exit
  -T            : test configuration, dump it and exit
  -q            : suppress non-error messages during configuration testing
  -s signal     : send signal to a master process: stop, quit, reopen, reload
  -p prefix     : set prefix path (default: ${ROOT}/)
  -e filename   : set error log file (default: logs/error.log)
  -c filename   : set configuration file (default: conf/nginx.conf)
  -g directives : set global directives out of configuration file

`;
}

function err(line: string): void {
  // messages quote configuration bytes (latin1 strings): write them back as the same bytes
  fs.writeSync(2, Buffer.from(`${NAME}: ${line}\n`, 'latin1'));
}

const SIGNALS: Record<string, NodeJS.Signals> = { stop: 'SIGTERM', quit: 'SIGQUIT', reopen: 'SIGUSR1', reload: 'SIGHUP' };

/** `-s`: signals the master named by the configuration's pid file (ngx_signal_process). */
function sendSignal(cycle: Cycle, name: string, log: ErrorLog): number {
  log.notice('signal process started');
  const pidFile = coreSettings(cycle).pid;
  let text: string;
  try {
    text = fs.readFileSync(pidFile, 'latin1');
  } catch (e) {
    log.error(`open() "${pidFile}" failed ${sysErrorText(e)}`);
    return 1;
  }
  const value = text.replace(/[\r\n]+$/, '');
  if (!/^\d+$/.test(value) || Number(value) <= 0) {
    log.error(`invalid PID number "${value}" in "${pidFile}"`);
    return 1;
  }
  const sig = SIGNALS[name];
  try {
    process.kill(Number(value), sig);
  } catch (e) {
    log.alert(`kill(${value}, ${os.constants.signals[sig]}) failed ${sysErrorText(e)}`);
    return 1;
  }
  return 0;
}

/** The log used before the configuration is loaded: -e (or logs/error.log) at notice, echoed to stderr. */
function openStartupLog(file: string): ErrorLog {
  try {
    return new ErrorLog([{ file, level: LogLevel.notice }], true);
  } catch (e) {
    err(`[alert] could not open error log file: open() "${file}" failed ${sysErrorText(e)}`);
    return new ErrorLog([{ file: 'stderr', level: LogLevel.notice }], true);
  }
}

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === 'gateway') {
    // APISIX's config.yaml becomes an nginx configuration, run like any other
    const { prepareGateway } = await import('../gateway/cli.ts');
    const nginxArgv = prepareGateway(argv.slice(1), ROOT);
    if (typeof nginxArgv === 'number') return nginxArgv;
    argv = nginxArgv;
  }
  let o: Options;
  try {
    o = parseOptions(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    err(e.message);
    return 1;
  }
  if (o.help || o.version) {
    fs.writeSync(2, versionText(o.version === 2) + (o.help ? helpText() : ''));
    return 0;
  }
  const daemonChild = takeDaemonChild();
  // nginx joins -p, -c and -e as given (a relative prefix stays relative in messages)
  const prefix = o.prefix === undefined ? ROOT + '/' : o.prefix === '' || o.prefix.endsWith('/') ? o.prefix : o.prefix + '/';
  const paths = resolvePaths(prefix, o.conf ?? 'conf/nginx.conf');
  const defaultErrorLog = o.errorLog === 'stderr' ? 'stderr' : fullName(prefix, o.errorLog ?? 'logs/error.log');
  // like nginx, errors before the configuration's own log is open go to stderr and to -e
  const startupLog = openStartupLog(defaultErrorLog);
  try {
    return await runWith(o, argv, { paths, defaultErrorLog, startupLog, daemonChild });
  } catch (e) {
    if (!(e instanceof ConfError)) throw e;
    startupLog.log(LogLevel[e.level as keyof typeof LogLevel] ?? LogLevel.emerg, e.text);
    if (o.test) err(`configuration file ${paths.confFile} test failed`);
    reportDaemonReady(e.text);
    return 1;
  } finally {
    startupLog.close();
  }
}

interface StartContext {
  paths: ReturnType<typeof resolvePaths>;
  defaultErrorLog: string;
  startupLog: ErrorLog;
  daemonChild: boolean;
}

/** Everything after option parsing; a ConfError means "log it and exit 1". */
async function runWith(o: Options, argv: string[], ctx: StartContext): Promise<number> {
  const { paths, defaultErrorLog, startupLog } = ctx;
  // the background copy of `daemon on` loads exactly what its parent checked
  const snapshot = ctx.daemonChild ? await receiveSnapshot() : undefined;
  const cycle = Cycle.load(modules, {
    paths,
    globals: o.globals,
    readFile: snapshot ? (file) => snapshot[file] ?? fs.readFileSync(file, 'latin1') : undefined,
    onSyntaxOk: o.test && !o.quiet ? () => err(`the configuration file ${paths.confFile} syntax is ok`) : undefined,
    // the background copy of `daemon on` reads what its parent already reported
    onWarning: ctx.daemonChild ? undefined : (w) => startupLog.log(w.level === 'alert' ? LogLevel.alert : LogLevel.warn, w.text),
  });

  if (o.test) {
    testCycleFiles(cycle);
    openCycleLog(cycle, defaultErrorLog).close();
    if (!o.quiet) err(`configuration file ${paths.confFile} test is successful`);
    if (o.dump) {
      let out = '';
      for (const f of cycle.files) out += `# configuration file ${f.name}:\n${f.text}\n`;
      fs.writeSync(1, Buffer.from(out, 'latin1'));
    }
    return 0;
  }
  if (o.signal) return sendSignal(cycle, o.signal, startupLog);

  if (coreSettings(cycle).daemon && !ctx.daemonChild) {
    // what would stop the start is reported here, before going to the background
    openCycleLog(cycle, defaultErrorLog).close();
    try {
      await checkBindable(cycle.listeners.values(), startupLog);
    } catch (e) {
      if (e instanceof BindFailed) return 1;
      throw e;
    }
    return daemonize(argv, cycle.snapshot());
  }

  const master = new Master(cycle, {
    paths, globals: o.globals, defaultErrorLog,
    banner: startBanner(`${NAME}/${GATEHOUSE_VERSION} (${NGINX_VER})`),
    onReady: ctx.daemonChild ? reportDaemonReady : undefined,
  });
  return (await master.run()) ? -1 : 1;
}

const code = await main(process.argv.slice(2));
if (code >= 0) {
  await daemonReportSent();
  process.exit(code);
}

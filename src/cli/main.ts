/**
 * `gatehouse` — nginx's command line: -?/-h -v -V -t -T -q -s -p -c -e -g,
 * with nginx's messages and exit codes; `gatehouse gateway` starts the
 * APISIX-style gateway (see src/gateway).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cycle, resolvePaths } from '../core/cycle.ts';
import { ErrorLog, LogLevel } from '../core/error-log.ts';
import { coreSettings } from '../core/modules/core.ts';
import { describeStartError, Master } from '../core/master.ts';
import { ConfError, sysErrorText } from '../conf/errors.ts';
import { modules } from '../modules.ts';
import { NGINX_VER } from '../http/special-response.ts';
import { WITH, WITHOUT } from './features.ts';
import { daemonize, isDaemonChild, reportDaemonReady } from './daemon.ts';

const ROOT = path.resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const GATEHOUSE_VERSION = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version as string;
const NAME = 'gatehouse';

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
  fs.writeSync(2, `${NAME}: ${line}\n`);
}

const SIGNALS: Record<string, NodeJS.Signals> = { stop: 'SIGTERM', quit: 'SIGQUIT', reopen: 'SIGUSR1', reload: 'SIGHUP' };

function sendSignal(cycle: Cycle, name: string): number {
  const pidFile = coreSettings(cycle).pid;
  let text: string;
  try {
    text = fs.readFileSync(pidFile, 'latin1');
  } catch (e) {
    err(`[error] open() "${pidFile}" failed ${sysErrorText(e)}`);
    return 1;
  }
  const pid = Number(text.trim());
  if (!/^\d+$/.test(text.trim()) || pid <= 0) {
    err(`[error] invalid PID number "${text.trim()}" in "${pidFile}"`);
    return 1;
  }
  try {
    process.kill(pid, SIGNALS[name]);
  } catch (e) {
    err(`[alert] kill(${pid}, ${os_signal_number(SIGNALS[name])}) failed ${sysErrorText(e)}`);
    return 1;
  }
  return 0;
}

function os_signal_number(sig: NodeJS.Signals): number {
  return { SIGTERM: 15, SIGQUIT: 3, SIGUSR1: 10, SIGHUP: 1 }[sig as string] ?? 0;
}

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === 'gateway') {
    err('[emerg] the gateway is not built yet');
    return 1;
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
  const prefix = path.resolve(o.prefix ?? ROOT) + '/';
  const paths = resolvePaths(prefix, o.conf ?? 'conf/nginx.conf');
  const defaultErrorLog = o.errorLog === 'stderr' ? 'stderr' : path.resolve(prefix, o.errorLog ?? 'logs/error.log');
  // like nginx, configuration errors go to stderr and to the error log known so far
  const startupLog = openStartupLog(defaultErrorLog);

  let cycle: Cycle;
  try {
    cycle = Cycle.load(modules, { paths, globals: o.globals });
  } catch (e) {
    if (!(e instanceof ConfError)) throw e;
    startupLog?.log(LogLevel.emerg, e.text);
    err(`[emerg] ${e.text}`);
    if (o.test) err(`configuration file ${paths.confFile} test failed`);
    return 1;
  }

  if (o.test) {
    if (!o.quiet) {
      err(`the configuration file ${paths.confFile} syntax is ok`);
      err(`configuration file ${paths.confFile} test is successful`);
    }
    if (o.dump) {
      let out = '';
      for (const f of cycle.files) out += `# configuration file ${f.name}:\n${f.text}\n`;
      fs.writeSync(1, Buffer.from(out, 'latin1'));
    }
    return 0;
  }
  if (o.signal) return sendSignal(cycle, o.signal);

  const core = coreSettings(cycle);
  if (core.daemon && !isDaemonChild()) return daemonize(argv);

  const master = new Master(cycle, {
    paths, globals: o.globals, defaultErrorLog,
    onReady: () => reportDaemonReady(),
  });
  try {
    await master.run();
  } catch (e) {
    const text = describeStartError(e);
    startupLog?.log(LogLevel.emerg, text);
    err(`[emerg] ${text}`);
    reportDaemonReady(text);
    return 1;
  }
  startupLog?.close();
  return -1;
}

function openStartupLog(file: string): ErrorLog | undefined {
  if (file === 'stderr') return undefined;
  try {
    return new ErrorLog([{ file, level: LogLevel.error }]);
  } catch (e) {
    err(`[alert] could not open error log file: open() "${file}" failed ${sysErrorText(e)}`);
    return undefined;
  }
}

const code = await main(process.argv.slice(2));
if (code >= 0) process.exit(code);

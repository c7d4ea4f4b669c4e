/**
 * ngx_core_module and ngx_events_module: the main-context directives
 * (worker_processes, pid, error_log, daemon, env, ...) and `events {}`.
 */
import os from 'node:os';
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { flagArg, setOnce, timeArg } from '../../conf/values.ts';
import type { CycleModule } from '../cycle.ts';
import type { Cycle } from '../cycle.ts';
import { LogLevel } from '../error-log.ts';
import type { ErrorLogSpec } from '../error-log.ts';

export interface CoreConf {
  workerProcesses?: number;
  daemon?: boolean;
  masterProcess?: boolean;
  pid?: string;
  workerShutdownTimeout?: number;
  user?: string;
  /** `env NAME` keeps NAME from the environment; `env NAME=value` sets it. */
  env: Array<{ name: string; value?: string }>;
  errorLogs: ErrorLogSpec[];
  workerConnections?: number;
  workerRlimitNofile?: number;
}

export const coreConf = defineSlot<CoreConf>('core', () => ({ env: [], errorLogs: [] }));

/** Parses `error_log file [level]` (shared by the main, http and stream contexts). */
export function parseErrorLog(cf: ConfContext, args: string[]): ErrorLogSpec {
  const file = args[0];
  let level: number = LogLevel.error;
  if (args.length > 1) {
    const name = args[1];
    if (!(name in LogLevel) || name === 'stderr') throw cf.error(`invalid log level "${name}"`);
    level = LogLevel[name as keyof typeof LogLevel];
    if (args.length > 2) throw cf.error(`invalid number of arguments in "error_log" directive`);
  }
  let target: string;
  if (file === 'stderr') target = 'stderr';
  else if (file.startsWith('syslog:') || file.startsWith('memory:')) target = 'stderr';
  else target = cf.prefixPath(file);
  return { file: target, level };
}

function ignored(name: string, contexts: number, args: Directive['args']): Directive {
  return { name, contexts, args, handler: () => undefined };
}

const directives: Directive[] = [
  {
    name: 'worker_processes', contexts: Ctx.MAIN, args: 1,
    handler(cf, n) {
      const v = n.args[0];
      const count = v === 'auto' ? os.availableParallelism() : Number(v);
      if (!/^\d+$/.test(v) && v !== 'auto') return 'invalid value';
      setOnce(cf, cf.get(coreConf), 'workerProcesses', count);
    },
  },
  {
    name: 'daemon', contexts: Ctx.MAIN, args: 'flag',
    handler(cf, n) { setOnce(cf, cf.get(coreConf), 'daemon', flagArg(cf, n.args[0])); },
  },
  {
    name: 'master_process', contexts: Ctx.MAIN, args: 'flag',
    handler(cf, n) { setOnce(cf, cf.get(coreConf), 'masterProcess', flagArg(cf, n.args[0])); },
  },
  {
    name: 'pid', contexts: Ctx.MAIN, args: 1,
    handler(cf, n) { setOnce(cf, cf.get(coreConf), 'pid', n.args[0] === 'off' ? '' : cf.prefixPath(n.args[0])); },
  },
  {
    name: 'worker_shutdown_timeout', contexts: Ctx.MAIN, args: 1,
    handler(cf, n) { setOnce(cf, cf.get(coreConf), 'workerShutdownTimeout', timeArg(cf, n.args[0])); },
  },
  {
    name: 'user', contexts: Ctx.MAIN, args: [1, 2],
    handler(cf, n) { setOnce(cf, cf.get(coreConf), 'user', n.args.join(' ')); },
  },
  {
    name: 'env', contexts: Ctx.MAIN, args: 1,
    handler(cf, n) {
      const [name, ...rest] = n.args[0].split('=');
      cf.get(coreConf).env.push(rest.length ? { name, value: rest.join('=') } : { name });
    },
  },
  {
    name: 'error_log', contexts: Ctx.MAIN, args: [1, 2],
    handler(cf, n) { cf.get(coreConf).errorLogs.push(parseErrorLog(cf, n.args)); },
  },
  {
    name: 'worker_rlimit_nofile', contexts: Ctx.MAIN, args: 1,
    handler(cf, n) { setOnce(cf, cf.get(coreConf), 'workerRlimitNofile', Number(n.args[0])); },
  },
  {
    name: 'load_module', contexts: Ctx.MAIN, args: 1,
    // every module is built in; nginx's dynamic module files are accepted and ignored
    handler() { return undefined; },
  },
  {
    name: 'events', contexts: Ctx.MAIN, args: 0, block: true,
    handler(cf, n) {
      if (cf.data.eventsSeen) return 'is duplicate';
      cf.data.eventsSeen = true;
      cf.block(n.children ?? [], Ctx.EVENTS, cf.level, 'events');
    },
  },
  {
    name: 'worker_connections', contexts: Ctx.EVENTS, args: 1,
    handler(cf, n) {
      const v = Number(n.args[0]);
      if (!Number.isInteger(v)) return 'invalid number';
      setOnce(cf, cf.get(coreConf), 'workerConnections', v);
    },
  },
  ignored('use', Ctx.EVENTS, 1),
  ignored('multi_accept', Ctx.EVENTS, 'flag'),
  ignored('accept_mutex', Ctx.EVENTS, 'flag'),
  ignored('accept_mutex_delay', Ctx.EVENTS, 1),
  ignored('debug_connection', Ctx.EVENTS, 1),
  ignored('worker_aio_requests', Ctx.EVENTS, 1),
  ignored('pcre_jit', Ctx.MAIN, 'flag'),
  ignored('timer_resolution', Ctx.MAIN, 1),
  ignored('worker_priority', Ctx.MAIN, 1),
  ignored('worker_cpu_affinity', Ctx.MAIN, [1, Infinity]),
  ignored('worker_rlimit_core', Ctx.MAIN, 1),
  ignored('working_directory', Ctx.MAIN, 1),
  ignored('lock_file', Ctx.MAIN, 1),
  ignored('thread_pool', Ctx.MAIN, [2, 3]),
  ignored('ssl_engine', Ctx.MAIN, 1),
];

export const coreModule: CycleModule = {
  name: 'ngx_core_module',
  directives,
};

/** The core settings with nginx's defaults applied. */
export function coreSettings(cycle: Cycle): Required<Omit<CoreConf, 'user' | 'workerRlimitNofile'>> & CoreConf {
  const c = cycle.main.get(coreConf);
  return {
    ...c,
    workerProcesses: c.workerProcesses ?? 1,
    daemon: c.daemon ?? true,
    masterProcess: c.masterProcess ?? true,
    pid: c.pid ?? cycle.paths.prefix + 'logs/nginx.pid',
    workerShutdownTimeout: c.workerShutdownTimeout ?? 0,
    workerConnections: c.workerConnections ?? 512,
    env: c.env,
    errorLogs: c.errorLogs,
  };
}

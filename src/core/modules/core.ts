/**
 * The main context as nginx reads it: ngx_core_module (worker_processes,
 * pid, daemon, user, env, load_module, ...), ngx_errlog_module (error_log,
 * its arguments read in src/core/error-log-args.ts),
 * ngx_events_module with ngx_event_core_module (`events {}`), and the main
 * directives of the regex, openssl and thread pool modules. Values and
 * messages follow nginx 1.22; what Gatehouse accepts without acting on it is
 * listed in docs/directives.md.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { ConfError, sysErrorText } from '../../conf/errors.ts';
import { enumOf, flagArg, msecArg, numberArg, offsetArg, parseNumber, stringArg } from '../../conf/values.ts';
import { setting, unique } from '../../conf/setters.ts';
import { Cycle } from '../cycle.ts';
import { isModuleScript, loadModuleFile } from '../load-module.ts';
import type { CycleModule } from '../cycle.ts';
import type { ErrorLogSpec } from '../error-log.ts';
import { parseErrorLog } from '../error-log-args.ts';

export interface CoreConf {
  workerProcesses?: number;
  daemon?: boolean;
  masterProcess?: boolean;
  pid?: string;
  lockFile?: string;
  workerShutdownTimeout?: number;
  timerResolution?: number;
  debugPoints?: string;
  workerPriority?: number;
  workerCpuAffinity?: string[];
  workingDirectory?: string;
  /** `user name [group]` as written (Gatehouse does not change users). */
  user?: string;
  group?: string;
  /** `env NAME` keeps NAME from the environment; `env NAME=value` sets it. */
  env: Array<{ name: string; value?: string }>;
  errorLogs: ErrorLogSpec[];
  workerRlimitNofile?: number;
  workerRlimitCore?: number;
  pcreJit?: boolean;
  /** Set by the `events` block. */
  events?: EventsConf;
}

export interface EventsConf {
  workerConnections?: number;
  use?: string;
  multiAccept?: boolean;
  acceptMutex?: boolean;
  acceptMutexDelay?: number;
  epollEvents?: number;
  workerAioRequests?: number;
}

export const coreConf = defineSlot<CoreConf>('core', () => ({ env: [], errorLogs: [] }));

/** nginx's DEFAULT_CONNECTIONS. */
const DEFAULT_CONNECTIONS = 512;

const EVENT_METHODS = ['epoll', 'poll', 'select'];

/** getpwnam()/getgrnam() from the local files (Gatehouse has no NSS). */
function inSystemFile(file: string, name: string): boolean {
  try {
    return fs.readFileSync(file, 'latin1').split('\n').some((l) => l.startsWith(`${name}:`));
  } catch {
    return false;
  }
}

/** Whether `addr/bits` (ngx_ptocidr) has address bits beyond its mask. */
function hostBitsSet(cidr: string): boolean {
  const [addr, bits, extra] = cidr.split('/');
  if (bits === undefined || extra !== undefined || !/^\d+$/.test(bits)) return false;
  const v4 = net.isIPv4(addr);
  if (!v4 && !net.isIPv6(addr)) return false;
  const width = v4 ? 32 : 128;
  if (Number(bits) > width) return false;
  const value = v4
    ? addr.split('.').reduce((a, o) => (a << 8n) | BigInt(o), 0n)
    : ipv6Value(addr);
  const hostMask = (1n << BigInt(width - Number(bits))) - 1n;
  return (value & hostMask) !== 0n;
}

function ipv6Value(addr: string): bigint {
  const [head, tail = ''] = addr.split('::');
  const words = (p: string) => (p ? p.split(':') : []);
  let parts = words(head);
  let rest = words(tail);
  // an embedded IPv4 address is two words
  const last = (addr.includes('::') ? rest : parts).at(-1);
  if (last?.includes('.')) {
    const o = last.split('.').map(Number);
    const w = [((o[0] << 8) | o[1]).toString(16), ((o[2] << 8) | o[3]).toString(16)];
    if (addr.includes('::')) rest = [...rest.slice(0, -1), ...w];
    else parts = [...parts.slice(0, -1), ...w];
  }
  const all = [...parts, ...Array(8 - parts.length - rest.length).fill('0'), ...rest];
  return all.reduce((a, w) => (a << 16n) | BigInt(`0x${w}`), 0n);
}

/** The module names a `load_module` file stands for when its own name is not one of ours. */
function builtIn(cf: ConfContext, name: string): boolean {
  const names = cf.registry.modules.map((m) => m.name);
  if (names.includes(name)) return true;
  if (name === 'ngx_stream_module') return names.some((n) => n.startsWith('ngx_stream_'));
  if (name === 'ngx_mail_module') return names.some((n) => n.startsWith('ngx_mail_'));
  if (name === 'ndk_http_module') return names.includes('ngx_http_lua_module');
  return false;
}

function events(cf: ConfContext): EventsConf {
  return cf.get(coreConf).events as EventsConf;
}

const directives: Directive[] = [
  { name: 'daemon', contexts: Ctx.MAIN, args: 'flag', handler: setting(coreConf, 'daemon', flagArg) },
  { name: 'master_process', contexts: Ctx.MAIN, args: 'flag', handler: setting(coreConf, 'masterProcess', flagArg) },
  {
    name: 'timer_resolution', contexts: Ctx.MAIN, args: 1,
    handler: setting(coreConf, 'timerResolution', msecArg),
  },
  { name: 'pid', contexts: Ctx.MAIN, args: 1, handler: setting(coreConf, 'pid', stringArg) },
  { name: 'lock_file', contexts: Ctx.MAIN, args: 1, handler: setting(coreConf, 'lockFile', stringArg) },
  {
    name: 'worker_processes', contexts: Ctx.MAIN, args: 1,
    handler: unique(coreConf, 'workerProcesses', (_cf, n, c) => {
      const v = n.args[0];
      const count = v === 'auto' ? os.availableParallelism() : parseNumber(v);
      if (Number.isNaN(count)) return 'invalid value';
      c.workerProcesses = count;
    }),
  },
  {
    name: 'debug_points', contexts: Ctx.MAIN, args: 1,
    handler: setting(coreConf, 'debugPoints', enumOf(['stop', 'abort'])),
  },
  {
    name: 'user', contexts: Ctx.MAIN, args: [1, 2],
    handler: unique(coreConf, 'user', (cf, n, c) => {
      if (process.geteuid?.() !== 0) {
        cf.warn('the "user" directive makes sense only if the master process runs with super-user privileges, ignored');
        return;
      }
      const [user, group = user] = n.args;
      if (!inSystemFile('/etc/passwd', user)) throw cf.error(`getpwnam("${user}") failed`);
      c.user = user;
      if (!inSystemFile('/etc/group', group)) throw cf.error(`getgrnam("${group}") failed`);
      c.group = group;
    }),
  },
  {
    name: 'worker_priority', contexts: Ctx.MAIN, args: 1,
    handler(cf, n) {
      const c = cf.get(coreConf);
      // nginx's unset value is 0, so `worker_priority 0` may be repeated
      if (c.workerPriority) return 'is duplicate';
      const m = /^([-+]?)(.*)$/s.exec(n.args[0]) as RegExpExecArray;
      const v = parseNumber(m[2]);
      if (Number.isNaN(v)) return 'invalid number';
      c.workerPriority = m[1] === '-' ? -v : v;
    },
  },
  {
    name: 'worker_cpu_affinity', contexts: Ctx.MAIN, args: [1, Infinity],
    handler: unique(coreConf, 'workerCpuAffinity', (cf, n, c) => {
      const masks = n.args[0] === 'auto' ? n.args.slice(1) : n.args;
      if (n.args[0] === 'auto' && n.args.length > 2) throw cf.error('invalid number of arguments in "worker_cpu_affinity" directive');
      for (const mask of masks) {
        if (mask.length > 1024) throw cf.error('"worker_cpu_affinity" supports up to 1024 CPUs only');
        // nginx checks from the last character on
        const bad = [...mask].reverse().find((ch) => ch !== ' ' && ch !== '0' && ch !== '1');
        if (bad !== undefined) throw cf.error(`invalid character "${bad}" in "worker_cpu_affinity"`);
      }
      c.workerCpuAffinity = n.args;
    }),
  },
  {
    name: 'worker_rlimit_nofile', contexts: Ctx.MAIN, args: 1,
    handler: setting(coreConf, 'workerRlimitNofile', numberArg),
  },
  {
    name: 'worker_rlimit_core', contexts: Ctx.MAIN, args: 1,
    handler: setting(coreConf, 'workerRlimitCore', offsetArg),
  },
  {
    name: 'worker_shutdown_timeout', contexts: Ctx.MAIN, args: 1,
    handler: setting(coreConf, 'workerShutdownTimeout', msecArg),
  },
  { name: 'working_directory', contexts: Ctx.MAIN, args: 1, handler: setting(coreConf, 'workingDirectory', stringArg) },
  {
    name: 'env', contexts: Ctx.MAIN, args: 1,
    handler(cf, n) {
      const v = n.args[0];
      const eq = v.indexOf('=');
      cf.get(coreConf).env.push(eq < 0 ? { name: v } : { name: v.slice(0, eq), value: v.slice(eq + 1) });
    },
  },
  {
    name: 'load_module', contexts: Ctx.MAIN, args: 1,
    handler(cf, n) {
      if (cf.data.modulesUsed) return 'is specified too late';
      // a module file of ours (not one of nginx's .so): imported, relative to the prefix as nginx has it
      if (isModuleScript(n.args[0])) {
        loadModuleFile(cf, cf.prefixPath(n.args[0]));
        return;
      }
      // every module is built in: a file naming one of ours is accepted, anything else is not there
      const name = path.basename(n.args[0]).replace(/\.so$/, '');
      if (!builtIn(cf, name)) throw cf.error(`module "${name}" is not built into gatehouse`);
    },
  },
  {
    name: 'error_log', contexts: Ctx.MAIN, args: [1, Infinity],
    handler(cf, n) { cf.get(coreConf).errorLogs.push(parseErrorLog(cf, n.args)); },
  },
  { name: 'pcre_jit', contexts: Ctx.MAIN, args: 'flag', handler: setting(coreConf, 'pcreJit', flagArg) },
  { name: 'ssl_engine', contexts: Ctx.MAIN, args: 1, handler() { /* accepted; Node's OpenSSL picks engines itself */ } },
  { name: 'thread_pool', contexts: Ctx.MAIN, args: [2, 3], handler() { /* accepted: no thread pools */ } },

  {
    name: 'events', contexts: Ctx.MAIN, args: 0, block: true,
    handler: unique(coreConf, 'events', (cf, n, c) => {
      c.events = {};
      cf.block(n.children ?? [], Ctx.EVENTS, cf.level, 'events');
    }),
  },
  {
    name: 'worker_connections', contexts: Ctx.EVENTS, args: 1,
    handler: unique(events, 'workerConnections', (cf, n, e) => {
      const v = parseNumber(n.args[0]);
      if (Number.isNaN(v)) throw cf.error(`invalid number "${n.args[0]}"`);
      e.workerConnections = v;
    }),
  },
  {
    name: 'use', contexts: Ctx.EVENTS, args: 1,
    handler: unique(events, 'use', (cf, n, e) => {
      if (!EVENT_METHODS.includes(n.args[0])) throw cf.error(`invalid event type "${n.args[0]}"`);
      e.use = n.args[0];
    }),
  },
  {
    name: 'multi_accept', contexts: Ctx.EVENTS, args: 'flag',
    handler: setting(events, 'multiAccept', flagArg),
  },
  {
    name: 'accept_mutex', contexts: Ctx.EVENTS, args: 'flag',
    handler: setting(events, 'acceptMutex', flagArg),
  },
  {
    name: 'accept_mutex_delay', contexts: Ctx.EVENTS, args: 1,
    handler: setting(events, 'acceptMutexDelay', msecArg),
  },
  {
    name: 'debug_connection', contexts: Ctx.EVENTS, args: 1,
    // accepted without effect (no per-client debug log); addresses are checked, host names are not resolved
    handler(cf, n) { if (hostBitsSet(n.args[0])) cf.warn(`low address bits of ${n.args[0]} are meaningless`); },
  },
  {
    name: 'epoll_events', contexts: Ctx.EVENTS, args: 1,
    handler: setting(events, 'epollEvents', numberArg),
  },
  {
    name: 'worker_aio_requests', contexts: Ctx.EVENTS, args: 1,
    handler: setting(events, 'workerAioRequests', numberArg),
  },
];

/**
 * nginx's checks once the configuration is read (the core modules'
 * init_conf, after `-t` says "syntax is ok"): an `events` block is required,
 * and every listening socket needs a connection.
 */
function initConf(cycle: Cycle): void {
  const c = cycle.main.get(coreConf);
  if (!c.events) throw new ConfError('no "events" section in configuration');
  const connections = c.events.workerConnections ?? DEFAULT_CONNECTIONS;
  const listening = cycle.listeners.size;
  if (connections < listening + 1) {
    throw new ConfError(`${connections} worker_connections are not enough for ${listening} listening sockets`);
  }
}

export const coreModule: CycleModule = {
  name: 'ngx_core_module',
  directives,
  initConf,
};

/** The core settings with nginx's defaults applied. */
export function coreSettings(cycle: Cycle): Required<Pick<CoreConf, 'workerProcesses' | 'daemon' | 'masterProcess' | 'pid' | 'workerShutdownTimeout' | 'env' | 'errorLogs'>> & CoreConf & { workerConnections: number } {
  const c = cycle.main.get(coreConf);
  return {
    ...c,
    workerProcesses: c.workerProcesses ?? 1,
    daemon: c.daemon ?? true,
    masterProcess: c.masterProcess ?? true,
    // nginx's compiled-in default is logs/nginx.pid under the prefix
    pid: fullPath(cycle, c.pid ?? 'logs/nginx.pid'),
    workerShutdownTimeout: c.workerShutdownTimeout ?? 0,
    workerConnections: c.events?.workerConnections ?? DEFAULT_CONNECTIONS,
    env: c.env,
    errorLogs: c.errorLogs,
  };
}

function fullPath(cycle: Cycle, p: string): string {
  return p.startsWith('/') ? p : cycle.paths.prefix + p;
}

/**
 * What `-t` opens after "syntax is ok", as ngx_init_cycle() does in test
 * mode: the pid file (created empty if missing, and left, as nginx leaves
 * it), then every log file in the order its directive was read (created).
 */
export function testCycleFiles(cycle: Cycle): void {
  const pid = coreSettings(cycle).pid;
  tryOpen(pid, fs.constants.O_RDWR | fs.constants.O_CREAT);
  for (const file of cycle.openFiles) tryOpen(file, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT);
}

function tryOpen(file: string, flags: number): void {
  try {
    fs.closeSync(fs.openSync(Buffer.from(file, 'latin1'), flags, 0o644));
  } catch (err) {
    throw new ConfError(`open() "${file}" failed ${sysErrorText(err)}`);
  }
}
